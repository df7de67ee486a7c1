/*
 * simba.h - the C API of libsimba: leader election and distributed locks on
 * PostgreSQL, MySQL/MariaDB, Redis, Zookeeper or an in-process store, through
 * the engine of Simba for Go (github.com/simba-go/simba).
 *
 * This header is the contract of libsimba. Names are stable: a function or a
 * type only changes with SIMBA_ABI_VERSION; status codes are only added.
 *
 * The model in a paragraph. A process opens one client on a backend URL
 * (simba_client_open); the client keeps one session alive in the background.
 * Winning a named lease gives a term: a fencing token that strictly increases
 * per name, and a validity that always ends before the backend could hand
 * the lease to someone else. A term is a hint, never proof that nobody else
 * owns the lease: send its token with every write and let the resource refuse
 * lower tokens.
 *
 * Handles. Clients, terms, elections and cancel handles are 64-bit integers;
 * 0 is never a valid handle, and a handle is never reused within a process.
 * Every call checks its handles (unknown, freed, or of another kind:
 * SIMBA_ERR_BAD_HANDLE) and its pointers (NULL: SIMBA_ERR_INVALID_ARGUMENT)
 * and strings (not UTF-8: SIMBA_ERR_INVALID_ARGUMENT; a bad lease name:
 * SIMBA_ERR_INVALID_NAME). Handles are safe to use from any thread.
 *
 * Errors. Every function that can fail returns a simba_status. After a
 * failure, simba_last_error copies the message of the last failed call of
 * the calling thread into a buffer of the caller; simba_last_error_message
 * returns it as a string to free with simba_string_free; the library frees
 * a thread's message when the thread exits. Messages never contain a
 * password of a backend URL (userinfo, query parameters such as password=
 * or sentinel_password=). No call lets a Go panic cross the
 * boundary: a bug of the library is reported as SIMBA_ERR_INTERNAL.
 *
 * Threads and callbacks. The callbacks of an election run on a thread of the
 * library (never the thread that started the election), one at a time and
 * in order for one election: every on_elected is followed by exactly one
 * on_revoked for the same term. A callback may call any function of this
 * header, including simba_election_step_down, simba_election_stop and
 * simba_client_close of its own election or client: those calls then do not
 * wait for the callback itself. A callback must return: while it blocks, the
 * election's later callbacks wait, and so do the stop and step-down calls of
 * other threads (up to their timeout). It must not unwind the stack (longjmp,
 * C++ exceptions) through the library. An election started with
 * simba_election_start_ex also calls a release function with its
 * user_data, once, after its last callback returned: the one moment at
 * which user_data can be freed safely even after a stop or close timed out.
 *
 * Fork. The library's threads do not survive fork(): in a child forked
 * from a process that loaded the library, every function below that needs
 * them fails at once with SIMBA_ERR_FORKED (simba_term_valid stores 0), and
 * no client, term or election of the parent can be used there. Start a
 * child that needs the library with exec (posix_spawn, fork + exec) and
 * open a client in it. simba_version, simba_abi_version,
 * simba_status_name, simba_last_error, simba_last_error_message and
 * simba_string_free work in a forked child. A child is told from its parent
 * by a pthread_atfork handler: a child made without running those handlers
 * (_Fork(), a raw clone or vfork system call) is not detected, and every
 * call there may hang. fork() from inside a callback hangs the child when
 * the callback returns into the library, whose other threads are gone:
 * such a child may only exec or _exit.
 *
 * Blocking calls take a timeout in milliseconds (SIMBA_NO_TIMEOUT: no bound)
 * and, for acquisitions, a cancel handle (0: none) that another thread can
 * cancel. A timeout larger than the library can wait (about 292 years, up
 * to INT64_MAX) waits that maximum; other negative values are refused
 * (SIMBA_ERR_INVALID_ARGUMENT). A timeout bounds the whole call: when it
 * passes, the call returns SIMBA_ERR_TIMEOUT (or the acquisition's error)
 * within a few milliseconds, whatever the backend does, and the work it
 * started goes on in the background as its description says. A timeout of
 * 0 does not wait: a stop, step-down or close of timeout 0 returns SIMBA_OK
 * if its work was already done when it looked, else SIMBA_ERR_TIMEOUT at
 * once while the work goes on in the background (the release function of
 * simba_election_start_ex tells when it ended); for acquisitions it means
 * one attempt, as their descriptions say.
 */
#ifndef SIMBA_H
#define SIMBA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library as "MAJOR.MINOR.PATCH" and of this header's ABI. */
#define SIMBA_VERSION "0.1.0"
#define SIMBA_ABI_VERSION 1

/* A timeout that waits until the wait ends by itself or is cancelled. */
#define SIMBA_NO_TIMEOUT (-1)

/* The status of a call. The values never change meaning. */
typedef int32_t simba_status;
enum {
	SIMBA_OK = 0,
	SIMBA_ERR_INVALID_ARGUMENT = 1,    /* NULL pointer, bad UTF-8, negative timeout, bad size */
	SIMBA_ERR_INVALID_NAME = 2,        /* a lease name is 1-128 characters of [A-Za-z0-9._:-], not "." or ".." */
	SIMBA_ERR_INVALID_URL = 3,         /* a backend URL of a form or scheme the library cannot open */
	SIMBA_ERR_INVALID_CONFIG = 4,      /* lease and renew interval do not fit together */
	SIMBA_ERR_BAD_HANDLE = 5,          /* unknown, freed, or of another kind than the call takes */
	SIMBA_ERR_LOCK_TIMEOUT = 6,        /* no term was won within the timeout */
	SIMBA_ERR_LOCK_HELD = 7,           /* try-acquire: the lease is held (elsewhere or by this client) */
	SIMBA_ERR_BACKEND_UNAVAILABLE = 8, /* the backend could not be asked (an outage, not contention) */
	SIMBA_ERR_CLOSED = 9,              /* the client is closed */
	SIMBA_ERR_CANCELLED = 10,          /* the cancel handle of the call was cancelled */
	SIMBA_ERR_TERM_EXPIRED = 11,       /* simba_term_ensure_valid: the term will not last long enough */
	SIMBA_ERR_ALREADY_STARTED = 12,    /* the election is already started on this client */
	SIMBA_ERR_NOT_STARTED = 13,        /* the election is not started */
	SIMBA_ERR_NAME_IN_USE = 14,        /* one client uses a name both as a lock and as an election */
	SIMBA_ERR_BUFFER_TOO_SMALL = 15,   /* the caller's buffer cannot hold the answer */
	SIMBA_ERR_TIMEOUT = 16,            /* a wait (stop, step down, close, release) hit its timeout */
	SIMBA_ERR_BACKEND = 17,            /* another error of the backend */
	SIMBA_ERR_INTERNAL = 18,           /* a bug of the library */
	SIMBA_ERR_FORKED = 19              /* this process was forked from the one that loaded the library */
};

/* Why a term ended (simba_term_reason, on_revoked). */
typedef int32_t simba_reason;
enum {
	SIMBA_NOT_REVOKED = 0,     /* the term lasts */
	SIMBA_STOPPED = 1,         /* the election stopped, the lock was released or the client closed */
	SIMBA_STEPPED_DOWN = 2,    /* the election stepped down */
	SIMBA_DEADLINE_PASSED = 3, /* the local deadline passed without a successful keep-alive */
	SIMBA_SESSION_EXPIRED = 4, /* the backend reported the session expired */
	SIMBA_TAKEN_OVER = 5       /* the backend no longer lists the lease as this session's */
};

/* A client, a term, an election or a cancel handle. 0 is never valid. */
typedef uint64_t simba_handle;

/*
 * The settings of simba_client_open. Zero fields take the defaults. Set size
 * to sizeof(simba_options): later versions only append fields, and read only
 * the fields the caller's size covers.
 */
typedef struct simba_options {
	uint32_t size;
	int64_t lease_ms;        /* how long the backend keeps the session after its last keep-alive; default 15000 */
	int64_t renew_ms;        /* keep-alive period; two must fit in lease_ms; default lease_ms/3 */
	const char *identity;    /* the identity of the session shown to other nodes; NULL or "": host:pid */
	int64_t open_timeout_ms; /* bound of the backend's opening (connect, first answer); default 10000 */
} simba_options;

/* An election's callbacks; either may be NULL. See "Threads and callbacks". */
typedef void (*simba_elected_fn)(void *user_data, simba_handle election, simba_handle term, uint64_t token);
typedef void (*simba_revoked_fn)(void *user_data, simba_handle election, simba_handle term, uint64_t token,
                                 simba_reason reason);

typedef struct simba_listener {
	simba_elected_fn on_elected; /* a term was won; the term handle is valid until on_revoked returned */
	simba_revoked_fn on_revoked; /* that term ended, with the reason; its handle is freed after the return */
	void *user_data;             /* passed as is to both; see simba_election_start for how long it must live */
} simba_listener;

/* Called once with an election's user_data after its last callback returned (simba_election_start_ex). */
typedef void (*simba_release_fn)(void *user_data);

/* Counters of the library, for leak checks in tests. */
typedef struct simba_stats {
	int64_t clients, terms, elections, cancels; /* live handles of each kind */
	int64_t goroutines;                         /* threads of work of the library, including its idle ones */
} simba_stats;

#ifndef SIMBA_NO_PROTOTYPES

/* ------------------------------------------------------------ the library */

/* The version of the library, "MAJOR.MINOR.PATCH"; a static string, never freed. */
const char *simba_version(void);

/* SIMBA_ABI_VERSION of the library: compare it with the header's. */
int32_t simba_abi_version(void);

/* The name of a status code ("SIMBA_ERR_LOCK_TIMEOUT"); a static string. */
const char *simba_status_name(simba_status status);

/*
 * Copies the message of the last failed call of this thread, NUL-terminated,
 * into buf (at most len bytes) and stores its length without the NUL in
 * *out_len when out_len is not NULL. Returns SIMBA_ERR_BUFFER_TOO_SMALL, with
 * as much as fits copied, when len is too short; "" when no call failed.
 * buf may be NULL when len is 0, to learn the length.
 */
simba_status simba_last_error(char *buf, size_t len, size_t *out_len);

/* The message of the last failed call of this thread, or NULL; free it with simba_string_free. */
char *simba_last_error_message(void);

/* Frees a string the library returned. NULL is ignored. */
void simba_string_free(char *s);

/* Fills *out with the live handles and goroutines of the library. */
simba_status simba_stats_get(simba_stats *out);

/* ------------------------------------------------------------ clients */

/*
 * Opens the backend of url and a client on it, and stores the client's handle
 * in *out_client. URLs: memory://NAME (this process only), redis://,
 * rediss://, postgres://, postgresql://, mysql://, zk://HOST:PORT[,...].
 * options may be NULL for the defaults. The backend must answer within the
 * open timeout (SIMBA_ERR_BACKEND_UNAVAILABLE otherwise); the session then
 * opens in the background, so the first acquisition may wait for it.
 */
simba_status simba_client_open(const char *url, const simba_options *options, simba_handle *out_client);

/*
 * Closes the client: its elections stop (their last on_revoked runs), its
 * terms end, its session closes so that the backend frees every lease at
 * once, and its backend connection closes. The client's handle is freed at
 * once; the handles of its terms and elections when the close ends (before
 * the return, unless it timed out), whatever the status. timeout_ms bounds
 * the whole call, callbacks and backend alike (0: do not wait, see the
 * top of this file): when it passes first, the
 * call returns SIMBA_ERR_TIMEOUT and the close goes on in the background
 * (callbacks of the elections may still come until it ends; their release
 * functions tell when); a backend that cannot be reached then frees the
 * leases when the session expires, at most one lease later.
 */
simba_status simba_client_close(simba_handle client, int64_t timeout_ms);

/*
 * Stores the client's snapshot as a JSON object in *out_json (free it with
 * simba_string_free), the document of docs/snapshot.schema.json, version
 * "simba.snapshot/v1": {"schema", "time", "session": {"id", "identity",
 * "status", "remainingMs", "renewIntervalMs", "leaseDurationMs",
 * "leaseShortened"}, "leases": [{"name", "kind", "state", "token",
 * "remainingMs", "waiters"}]}, durations in whole milliseconds, the time in
 * RFC 3339 UTC, states HOLDING, CONTENDING, COOLDOWN or IDLE (for locks and
 * elections alike). Check "schema" before reading the rest.
 */
simba_status simba_client_snapshot(simba_handle client, char **out_json);

/* ------------------------------------------------------------ locks */

/*
 * Waits at most timeout_ms (SIMBA_NO_TIMEOUT: no bound) for the lock of
 * name, and until cancel (a cancel handle, or 0) is cancelled; a timeout of
 * 0 makes one attempt, as simba_lock_try_acquire does, and fails with
 * SIMBA_ERR_LOCK_TIMEOUT when the lease is held. On success
 * stores the handle of the lock term in *out_term. Fails with
 * SIMBA_ERR_LOCK_TIMEOUT, SIMBA_ERR_BACKEND_UNAVAILABLE (the wait timed out
 * while the backend could not be asked) or SIMBA_ERR_CANCELLED; a failed or
 * cancelled acquisition never leaves the lock held. A second acquisition of
 * a name this client holds waits for the first release.
 */
simba_status simba_lock_acquire(simba_handle client, const char *name, int64_t timeout_ms, simba_handle cancel,
                                simba_handle *out_term);

/*
 * Makes one attempt: the term, or SIMBA_ERR_LOCK_HELD when the lease is held
 * elsewhere or by this client. The answer is awaited at most one lease
 * duration, timeout_ms (0 or SIMBA_NO_TIMEOUT: no bound of its own) and
 * until cancel is cancelled.
 */
simba_status simba_lock_try_acquire(simba_handle client, const char *name, int64_t timeout_ms, simba_handle cancel,
                                    simba_handle *out_term);

/*
 * Ends a lock term and releases its lease, waiting for the backend's answer
 * at most timeout_ms. Idempotent: releasing an ended term is SIMBA_OK. Any
 * thread may release. The handle stays valid (token, reason) until
 * simba_term_free.
 */
simba_status simba_lock_release(simba_handle term, int64_t timeout_ms);

/* Releases a lock term if still held, and frees its handle. */
simba_status simba_term_free(simba_handle term);

/* ------------------------------------------------------------ terms */

/* The term's fencing token: > 0, strictly increasing across terms of a name. */
simba_status simba_term_token(simba_handle term, uint64_t *out_token);

/* Stores 1 in *out_valid while the term lasts, 0 once it ended (for good). */
simba_status simba_term_valid(simba_handle term, int *out_valid);

/* Milliseconds to the term's local deadline, 0 once it ended. */
simba_status simba_term_remaining_ms(simba_handle term, int64_t *out_ms);

/* SIMBA_OK when the term stays valid for more than min_ms, else SIMBA_ERR_TERM_EXPIRED. */
simba_status simba_term_ensure_valid(simba_handle term, int64_t min_ms);

/* Why the term ended, SIMBA_NOT_REVOKED while it lasts. */
simba_status simba_term_reason(simba_handle term, simba_reason *out_reason);

/* ------------------------------------------------------------ elections */

/*
 * Starts contending for the leadership of name on the client, reporting each
 * term to listener (copied), and stores the election's handle in
 * *out_election. user_data must stay valid until the last callback
 * returned: after a stop or close that returned SIMBA_OK, or, after one that
 * timed out, until the callback running then returned; prefer
 * simba_election_start_ex, which says when.
 */
simba_status simba_election_start(simba_handle client, const char *name, const simba_listener *listener,
                                  simba_handle *out_election);

/*
 * simba_election_start, and release (may be NULL) is called once with the
 * listener's user_data after the election's last callback returned, so it
 * may free user_data: before simba_election_stop or simba_client_close
 * returns SIMBA_OK from another thread, after the calling callback returned
 * when they are called from a callback of the election, and, after one that
 * timed out, once the callback running then returned. It runs on the
 * stopping thread or on a thread of the library, never while a callback of
 * the election runs, and must not block. When the start fails it is not
 * called: user_data stays the caller's.
 */
simba_status simba_election_start_ex(simba_handle client, const char *name, const simba_listener *listener,
                                     simba_release_fn release, simba_handle *out_election);

/*
 * Gives the current term up (SIMBA_STEPPED_DOWN) and contends again
 * cooldown_ms later. Returns after that term's on_revoked ran, or at
 * timeout_ms (SIMBA_ERR_TIMEOUT; the step-down completes anyway, in the
 * background), whatever the backend does.
 */
simba_status simba_election_step_down(simba_handle election, int64_t cooldown_ms, int64_t timeout_ms);

/*
 * Stops the election and frees its handle: the term is revoked
 * (SIMBA_STOPPED) and released, and the last on_revoked runs before the call
 * returns, unless timeout_ms passes first (SIMBA_ERR_TIMEOUT; 0 does not
 * wait at all; the stop
 * completes anyway, and callbacks may come until it has: the release
 * function of simba_election_start_ex tells when). After a return without
 * timeout no callback comes. Called from a callback of the election, the
 * stop does not wait for that callback and returns at once; the one
 * callback that still comes after it is the on_revoked (SIMBA_STOPPED) of
 * the term whose on_elected ran, if that has not come yet, once the calling
 * callback returned: no on_elected, nothing after that on_revoked.
 * simba_client_close behaves the same for the elections of its client.
 */
simba_status simba_election_stop(simba_handle election, int64_t timeout_ms);

/* ------------------------------------------------------------ cancel handles */

/* Stores a new cancel handle in *out_cancel. */
simba_status simba_cancel_new(simba_handle *out_cancel);

/* Cancels every call waiting with this handle, and every later one: it stays cancelled. */
simba_status simba_cancel(simba_handle cancel);

/* Cancels and frees the cancel handle. */
simba_status simba_cancel_free(simba_handle cancel);

#endif /* SIMBA_NO_PROTOTYPES */

#ifdef __cplusplus
}
#endif

#endif /* SIMBA_H */
