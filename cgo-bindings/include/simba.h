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
 * Handles. Clients, terms, elections, event streams and cancel handles are
 * 64-bit integers; 0 is never a valid handle, and a handle is never reused
 * within a process.
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
 * Leader work (simba_run_while_leader, simba_group_run) runs on threads of
 * the library as well, once per term, and may call any function of this
 * header; simba_client_close called from it does not wait for it. Events
 * are not callbacks: a reader takes them from a stream (simba_events_next)
 * on a thread of its own, and the engine never waits for it.
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

/* The largest number of permits a semaphore may have. */
#define SIMBA_MAX_PERMITS 1024

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
	SIMBA_ERR_FORKED = 19,             /* this process was forked from the one that loaded the library */
	SIMBA_ERR_PERMITS_MISMATCH = 20    /* a semaphore is held with another number of permits */
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

/* What an event reports (simba_event.kind). The values never change meaning. */
typedef int32_t simba_event_kind;
enum {
	SIMBA_EVENT_SESSION_OPENED = 1,          /* a new session is live; granted_ns is its validity */
	SIMBA_EVENT_SESSION_SUSPENDED = 2,       /* a keep-alive failed; error says why */
	SIMBA_EVENT_SESSION_RESTORED = 3,        /* a keep-alive succeeded after failures */
	SIMBA_EVENT_SESSION_DEADLINE_PASSED = 4, /* the local deadline passed: every term revoked */
	SIMBA_EVENT_SESSION_EXPIRED = 5,         /* the backend reported the session expired */
	SIMBA_EVENT_SESSION_LEASE_SHORTENED = 6, /* the backend granted less than asked; granted_ns */
	SIMBA_EVENT_SESSION_CLOSED = 7,          /* the client closed its session */
	SIMBA_EVENT_ELECTED = 8,                 /* a term was won; name, token, lock, waited_ns (a lock's) */
	SIMBA_EVENT_REVOKED = 9,                 /* a term ended; name, token, lock, reason */
	SIMBA_EVENT_BACKEND_ERROR = 10,          /* a backend call failed; error, name when about a lease */
	SIMBA_EVENT_WORK_FAILED = 11,            /* leader work failed; name, token, error */
	SIMBA_EVENT_LISTENER_PANICKED = 12,      /* a listener of the engine panicked; name, token, error */
	SIMBA_EVENT_KEEP_ALIVE = 13,             /* a keep-alive was answered or failed; latency_ns, error */
	SIMBA_EVENT_DROPPED = 14,                /* the reader fell behind and missed `dropped` events, the oldest */
	SIMBA_EVENT_BACKEND_WARNING = 15         /* the backend found a setup that weakens a guarantee; warning_* */
};

/*
 * One event of a stream (simba_events_next). Set size to
 * sizeof(simba_event) before the call: later versions only append fields.
 * Each string is NUL-terminated, owned by the event and NULL when the
 * event has none; simba_event_clear frees them.
 */
typedef struct simba_event {
	uint32_t size;
	simba_event_kind kind;
	int64_t time_unix_ns; /* when it happened, nanoseconds since 1970 UTC */
	uint64_t token;       /* the term's token (ELECTED, REVOKED, WORK_FAILED) */
	simba_reason reason;  /* REVOKED: why the term ended */
	int32_t lock;         /* ELECTED, REVOKED: 1 for a lock's term, 0 for an election's */
	int64_t granted_ns;   /* SESSION_OPENED, SESSION_LEASE_SHORTENED: the validity granted */
	int64_t latency_ns;   /* KEEP_ALIVE: the round trip of the call */
	int64_t waited_ns;    /* ELECTED of a lock: how long the winning acquisition waited */
	int64_t dropped;      /* DROPPED: the events missed since the last DROPPED */
	char *session;        /* the session's id */
	char *name;           /* the lease */
	char *error;          /* what failed */
	char *warning_code;   /* BACKEND_WARNING: a stable code */
	char *warning_message;
} simba_event;

/*
 * Who holds a lease, as the backend sees it (simba_lease_holder). Set size
 * to sizeof(simba_holder) before the call. The strings are owned by the
 * holder, NULL when absent; simba_holder_clear frees them.
 */
typedef struct simba_holder {
	uint32_t size;
	uint64_t token;        /* the fencing token of the holder's term */
	int64_t since_unix_ns; /* when that term began by the backend's clock; 0 when the backend does not record it */
	char *session;         /* the holding session's id */
	char *identity;        /* the identity of the client behind it (simba_options.identity); NULL when unknown */
} simba_holder;

/*
 * Leader work (simba_run_while_leader, simba_group_run), called on a thread
 * of the library once per term won, with the term's handle, valid until the
 * work returns. The work must check the term (simba_term_valid,
 * simba_term_ensure_valid, simba_term_wait_end) and return soon after it
 * ended: the term's lease is released once the work returned, or at its
 * local deadline. It returns SIMBA_OK when its work is done, or a status of
 * its choosing when it failed. partition is the partition's number, 0 to
 * partitions-1.
 */
typedef simba_status (*simba_work_fn)(void *user_data, simba_handle term, uint64_t token);
typedef simba_status (*simba_partition_fn)(void *user_data, int32_t partition, simba_handle term, uint64_t token);

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

/* Stores the number of live event streams (a kind of handle simba_stats does not count) in *out. */
simba_status simba_stats_events(int64_t *out);

/* The name of a revoke reason as the engine prints it ("STOPPED"), "REASON_UNKNOWN" for another value; static. */
const char *simba_reason_name(simba_reason reason);

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
 * the return, unless it timed out), whatever the status, except that of an
 * election's term, valid until its on_revoked returned. Called from outside
 * a callback, it also waits for the callbacks and the release of an
 * election whose simba_election_stop timed out. timeout_ms bounds
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

/* ------------------------------------------------------------ semaphores */

/*
 * Waits for one of the permits permits of the semaphore name, with the
 * timeout_ms, cancel and errors of simba_lock_acquire: up to permits terms
 * of the name are held at once across every client of the backend, each
 * with a fencing token that strictly increases per semaphore name. A
 * permit is slot i of the semaphore, the lease "name:i"; its term is a
 * lock term, which simba_lock_release, simba_term_free and the simba_term_*
 * functions take as any other. permits must be 1 to SIMBA_MAX_PERMITS
 * (else SIMBA_ERR_INVALID_ARGUMENT) and name valid with the name of its
 * last slot (else SIMBA_ERR_INVALID_NAME). Every holder must ask with the
 * same permits: while permits granted under another number are held, the
 * call fails at once with SIMBA_ERR_PERMITS_MISMATCH. A backend without
 * semaphores gives SIMBA_ERR_BACKEND.
 */
simba_status simba_semaphore_acquire(simba_handle client, const char *name, int32_t permits, int64_t timeout_ms,
                                     simba_handle cancel, simba_handle *out_term);

/*
 * Makes one attempt at each permit of the semaphore name: the term of the
 * first it wins, or SIMBA_ERR_LOCK_HELD when all are held, with the bounds
 * of simba_lock_try_acquire and the arguments and errors of
 * simba_semaphore_acquire.
 */
simba_status simba_semaphore_try_acquire(simba_handle client, const char *name, int32_t permits, int64_t timeout_ms,
                                         simba_handle cancel, simba_handle *out_term);

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

/*
 * Waits at most timeout_ms (SIMBA_NO_TIMEOUT: no bound) for the term to end:
 * SIMBA_OK once it ended (at once for an ended term), SIMBA_ERR_TIMEOUT while
 * it lasts. Leader work sleeps with it between steps and wakes when its term
 * ends.
 */
simba_status simba_term_wait_end(simba_handle term, int64_t timeout_ms);

/* ------------------------------------------------------------ holders */

/*
 * Asks the backend who holds the lease of name now, on any node, this
 * client included: stores 1 in *out_held and fills *out, or 0 when nobody
 * holds it (every field of *out zero, strings NULL). The answer is awaited
 * at most one renew interval of the client, timeout_ms (SIMBA_NO_TIMEOUT:
 * no bound of its own) and until cancel (or 0) is cancelled. Fails with
 * SIMBA_ERR_INVALID_NAME, SIMBA_ERR_BACKEND_UNAVAILABLE, SIMBA_ERR_TIMEOUT or
 * SIMBA_ERR_CANCELLED. Free the strings with simba_holder_clear, also after
 * a failure (they are then NULL).
 */
simba_status simba_lease_holder(simba_handle client, const char *name, int64_t timeout_ms, simba_handle cancel,
                                int *out_held, simba_holder *out);

/* Frees the strings of a holder and sets them to NULL; NULL and a cleared holder are ignored. */
void simba_holder_clear(simba_holder *holder);

/* ------------------------------------------------------------ elections */

/*
 * Starts contending for the leadership of name on the client, reporting each
 * term to listener (copied), and stores the election's handle in
 * *out_election. user_data must stay valid until the last callback
 * returned: after a stop or close that returned SIMBA_OK, or, after one that
 * timed out, until the callback running then returned and the on_revoked of
 * its term, which still follows an on_elected, returned too; a later
 * simba_client_close that returns SIMBA_OK waits for them. Prefer
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

/* ------------------------------------------------------------ leader work */

/*
 * Contends for the leadership of name and calls work once per term won,
 * until one of these, and stops the election with the ordered handover
 * before it returns (the work returned, or the term's deadline passed,
 * before the lease is released):
 *   - timeout_ms passes (SIMBA_NO_TIMEOUT: no bound) or cancel is
 *     cancelled: SIMBA_OK;
 *   - work returns while its term lasts: the work is over, the node stops
 *     leading, and the call returns what work returned (a status outside
 *     this header's as SIMBA_ERR_BACKEND);
 *   - the client is closed: SIMBA_ERR_CLOSED.
 * Work whose term ended first (lost, taken over) runs again on the next
 * term. The call returns after the last call of work returned, so
 * user_data may be freed then. Work may call any function of this header;
 * a stop of the client from the work (simba_client_close) does not wait
 * for the work. It fails like simba_election_start: the name already runs
 * an election on this client (SIMBA_ERR_ALREADY_STARTED) or is a lock
 * (SIMBA_ERR_NAME_IN_USE).
 */
simba_status simba_run_while_leader(simba_handle client, const char *name, simba_work_fn work, void *user_data,
                                    int64_t timeout_ms, simba_handle cancel);

/*
 * Joins the partition group name of `partitions` partitions (1 to 4096;
 * partition i is the lease "name.i", held by at most one node) and calls
 * work for each partition this node wins, with the partition's number.
 * Partitions spread over the live nodes of the group within one of an even
 * share, with the ordered handover, as nodes join and leave. It returns
 * when timeout_ms passes or cancel is cancelled (SIMBA_OK), when a
 * partition's work fails while its term lasts (its status), or when the
 * client closes (SIMBA_ERR_CLOSED), after every partition stopped and the
 * last call of work returned. A work that returns SIMBA_OK gives its
 * partition up for one renew interval, so that the group rebalances it.
 * Partition names must be valid lease names (SIMBA_ERR_INVALID_NAME).
 */
simba_status simba_group_run(simba_handle client, const char *name, int32_t partitions, simba_partition_fn work,
                             void *user_data, int64_t timeout_ms, simba_handle cancel);

/* ------------------------------------------------------------ events */

/*
 * Opens a stream of the client's events (session, terms, backend errors)
 * and stores its handle in *out_events. The stream keeps at most capacity
 * events (0: 1024; at most 1048576) for its reader: the engine never waits
 * for it, and when the reader falls that far behind the oldest event is
 * dropped. The reader then gets a SIMBA_EVENT_DROPPED, with the count,
 * before the next event. The stream stays valid after the client's close,
 * which gives its last events (SIMBA_EVENT_SESSION_CLOSED among them),
 * until simba_events_free.
 */
simba_status simba_events_subscribe(simba_handle client, int32_t capacity, simba_handle *out_events);

/*
 * Stores the next event of the stream in *out (set out->size first),
 * waiting at most timeout_ms for one (0: no wait; SIMBA_NO_TIMEOUT: until
 * one comes). SIMBA_ERR_TIMEOUT when none came, SIMBA_ERR_CLOSED once the
 * client is closed and every event was read, SIMBA_ERR_BAD_HANDLE when
 * the stream is freed, even while waiting. Free the event's strings with
 * simba_event_clear. Any thread may read; each event goes to one reader.
 */
simba_status simba_events_next(simba_handle events, int64_t timeout_ms, simba_event *out);

/* Stores in *out_dropped how many events the stream dropped since its subscription. */
simba_status simba_events_dropped(simba_handle events, uint64_t *out_dropped);

/* Ends the subscription and frees its handle; a simba_events_next waiting on it returns. */
simba_status simba_events_free(simba_handle events);

/* Frees the strings of an event and sets them to NULL; NULL and a cleared event are ignored. */
void simba_event_clear(simba_event *event);

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
