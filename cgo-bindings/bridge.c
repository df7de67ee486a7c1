/* The C side of libsimba (see bridge.h): what must live on the calling
 * thread rather than in Go, where a goroutine may move between threads,
 * and what must work without Go: the checks after a fork and the answers
 * that need no engine. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "include/simba.h" /* with the prototypes, to check the definitions below */

#include "_cgo_export.h"
#include "bridge.h"

/* ------------------------------------------------------------ last error */

/* The message of the last failed call of a thread, NUL-terminated. It
 * hangs off a thread-specific key whose destructor frees it when the
 * thread exits, so short-lived threads leave nothing behind. */
struct last_error {
	size_t len;
	char msg[];
};

static pthread_key_t last_error_key;
static pthread_once_t last_error_once = PTHREAD_ONCE_INIT;
static int last_error_ready;

static void last_error_make_key(void) { last_error_ready = pthread_key_create(&last_error_key, free) == 0; }

static struct last_error *last_error_get(void) {
	pthread_once(&last_error_once, last_error_make_key);
	return last_error_ready ? pthread_getspecific(last_error_key) : NULL;
}

void simba_bridge_set_error(const char *msg, size_t len) {
	pthread_once(&last_error_once, last_error_make_key);
	if (!last_error_ready) {
		return;
	}
	struct last_error *e = malloc(sizeof *e + len + 1);
	if (e == NULL) {
		return; /* keep the previous message rather than fail the call */
	}
	e->len = len;
	memcpy(e->msg, msg, len);
	e->msg[len] = '\0';
	struct last_error *old = pthread_getspecific(last_error_key);
	if (pthread_setspecific(last_error_key, e) != 0) {
		free(e);
		return;
	}
	free(old);
}

/* ------------------------------------------------------------ callbacks */

/* The id of the callback running on this thread, 0 when none: a call a
 * callback makes into the library passes it to the engine, so that stopping
 * the election from its own callback does not wait for that callback. */
static __thread uint64_t current_callback;

void simba_bridge_call_elected(simba_elected_fn fn, void *user_data, simba_handle election, simba_handle term,
                               uint64_t token, uint64_t callback) {
	uint64_t outer = current_callback;
	current_callback = callback;
	fn(user_data, election, term, token);
	current_callback = outer;
}

void simba_bridge_call_revoked(simba_revoked_fn fn, void *user_data, simba_handle election, simba_handle term,
                               uint64_t token, simba_reason reason, uint64_t callback) {
	uint64_t outer = current_callback;
	current_callback = callback;
	fn(user_data, election, term, token, reason);
	current_callback = outer;
}

void simba_bridge_call_release(simba_release_fn fn, void *user_data) { fn(user_data); }

simba_status simba_bridge_call_work(simba_work_fn fn, void *user_data, simba_handle term, uint64_t token,
                                    uint64_t callback) {
	uint64_t outer = current_callback;
	current_callback = callback;
	simba_status st = fn(user_data, term, token);
	current_callback = outer;
	return st;
}

simba_status simba_bridge_call_partition(simba_partition_fn fn, void *user_data, int32_t partition, simba_handle term,
                                         uint64_t token, uint64_t callback) {
	uint64_t outer = current_callback;
	current_callback = callback;
	simba_status st = fn(user_data, partition, term, token);
	current_callback = outer;
	return st;
}

uint64_t simba_bridge_current_callback(void) { return current_callback; }

/* ------------------------------------------------------------ fork */

/* Set in the child of a fork. The Go runtime of the library does not
 * survive a fork (only the forking thread goes on in the child, none of
 * the runtime's), so the child must never enter Go: every call fails here
 * instead, and no term of the parent can look valid in the child. */
static volatile int forked;

static void mark_forked(void) { forked = 1; }

__attribute__((constructor)) static void watch_fork(void) { pthread_atfork(NULL, NULL, mark_forked); }

static const char forked_message[] =
    "simba: this process was forked from the one that loaded libsimba, and the library cannot run in it "
    "(none of its threads survive a fork): no client, term or election of the parent is usable here. "
    "Start the child with exec instead (Python: the multiprocessing start method \"spawn\" or \"forkserver\", "
    "or subprocess) and open a new client in it.";

static simba_status forked_error(void) {
	simba_bridge_set_error(forked_message, sizeof forked_message - 1);
	return SIMBA_ERR_FORKED;
}

#define CHECK_FORK()                                                                                               \
	do {                                                                                                           \
		if (forked) {                                                                                              \
			return forked_error();                                                                                 \
		}                                                                                                          \
	} while (0)

/* ------------------------------------------------------------ the public functions without Go */

const char *simba_version(void) { return SIMBA_VERSION; }

int32_t simba_abi_version(void) { return SIMBA_ABI_VERSION; }

static const char *const status_names[] = {
    "SIMBA_OK",
    "SIMBA_ERR_INVALID_ARGUMENT",
    "SIMBA_ERR_INVALID_NAME",
    "SIMBA_ERR_INVALID_URL",
    "SIMBA_ERR_INVALID_CONFIG",
    "SIMBA_ERR_BAD_HANDLE",
    "SIMBA_ERR_LOCK_TIMEOUT",
    "SIMBA_ERR_LOCK_HELD",
    "SIMBA_ERR_BACKEND_UNAVAILABLE",
    "SIMBA_ERR_CLOSED",
    "SIMBA_ERR_CANCELLED",
    "SIMBA_ERR_TERM_EXPIRED",
    "SIMBA_ERR_ALREADY_STARTED",
    "SIMBA_ERR_NOT_STARTED",
    "SIMBA_ERR_NAME_IN_USE",
    "SIMBA_ERR_BUFFER_TOO_SMALL",
    "SIMBA_ERR_TIMEOUT",
    "SIMBA_ERR_BACKEND",
    "SIMBA_ERR_INTERNAL",
    "SIMBA_ERR_FORKED",
    "SIMBA_ERR_PERMITS_MISMATCH",
};

const char *simba_status_name(simba_status status) {
	if (status < 0 || (size_t)status >= sizeof status_names / sizeof status_names[0]) {
		return "SIMBA_STATUS_UNKNOWN";
	}
	return status_names[status];
}

static const char *const reason_names[] = {
    "NOT_REVOKED", "STOPPED", "STEPPED_DOWN", "DEADLINE_PASSED", "SESSION_EXPIRED", "TAKEN_OVER",
};

const char *simba_reason_name(simba_reason reason) {
	if (reason < 0 || (size_t)reason >= sizeof reason_names / sizeof reason_names[0]) {
		return "REASON_UNKNOWN";
	}
	return reason_names[reason];
}

/* Whether a struct whose first field is its size covers the field that
 * ends at end. */
#define COVERS(p, field) ((p)->size >= offsetof(__typeof__(*(p)), field) + sizeof((p)->field))

/* Frees the string field of *p, when the size of *p covers it, and sets
 * the field to NULL. */
#define FREE_FIELD(p, field)                                                                                       \
	do {                                                                                                           \
		if (COVERS(p, field)) {                                                                                    \
			free((p)->field);                                                                                      \
			(p)->field = NULL;                                                                                     \
		}                                                                                                          \
	} while (0)

void simba_holder_clear(simba_holder *holder) {
	if (holder == NULL) {
		return;
	}
	FREE_FIELD(holder, session);
	FREE_FIELD(holder, identity);
}

void simba_event_clear(simba_event *event) {
	if (event == NULL) {
		return;
	}
	FREE_FIELD(event, session);
	FREE_FIELD(event, name);
	FREE_FIELD(event, error);
	FREE_FIELD(event, warning_code);
	FREE_FIELD(event, warning_message);
}

simba_status simba_last_error(char *buf, size_t len, size_t *out_len) {
	struct last_error *e = last_error_get();
	const char *msg = e != NULL ? e->msg : "";
	size_t n = e != NULL ? e->len : 0;
	if (out_len != NULL) {
		*out_len = n;
	}
	if (len == 0) {
		/* A length query (NULL, 0), or a buffer without room for the NUL. */
		return buf == NULL ? SIMBA_OK : SIMBA_ERR_BUFFER_TOO_SMALL;
	}
	if (buf == NULL) {
		return SIMBA_ERR_INVALID_ARGUMENT;
	}
	if (n < len) {
		memcpy(buf, msg, n + 1);
		return SIMBA_OK;
	}
	memcpy(buf, msg, len - 1);
	buf[len - 1] = '\0';
	return SIMBA_ERR_BUFFER_TOO_SMALL;
}

char *simba_last_error_message(void) {
	struct last_error *e = last_error_get();
	if (e == NULL) {
		return NULL;
	}
	char *copy = malloc(e->len + 1);
	if (copy != NULL) {
		memcpy(copy, e->msg, e->len + 1);
	}
	return copy;
}

void simba_string_free(char *s) { free(s); }

/* ------------------------------------------------------------ the public functions of the Go side */

simba_status simba_stats_get(simba_stats *out) {
	CHECK_FORK();
	return simbago_stats_get(out);
}

simba_status simba_stats_events(int64_t *out) {
	CHECK_FORK();
	return simbago_stats_events(out);
}

simba_status simba_client_open(const char *url, const simba_options *options, simba_handle *out_client) {
	CHECK_FORK();
	return simbago_client_open((char *)url, (simba_options *)options, out_client);
}

simba_status simba_client_close(simba_handle client, int64_t timeout_ms) {
	CHECK_FORK();
	return simbago_client_close(client, timeout_ms);
}

simba_status simba_client_snapshot(simba_handle client, char **out_json) {
	CHECK_FORK();
	return simbago_client_snapshot(client, out_json);
}

simba_status simba_lock_acquire(simba_handle client, const char *name, int64_t timeout_ms, simba_handle cancel,
                                simba_handle *out_term) {
	CHECK_FORK();
	return simbago_lock_acquire(client, (char *)name, timeout_ms, cancel, out_term);
}

simba_status simba_lock_try_acquire(simba_handle client, const char *name, int64_t timeout_ms, simba_handle cancel,
                                    simba_handle *out_term) {
	CHECK_FORK();
	return simbago_lock_try_acquire(client, (char *)name, timeout_ms, cancel, out_term);
}

simba_status simba_semaphore_acquire(simba_handle client, const char *name, int32_t permits, int64_t timeout_ms,
                                     simba_handle cancel, simba_handle *out_term) {
	CHECK_FORK();
	return simbago_semaphore_acquire(client, (char *)name, permits, timeout_ms, cancel, out_term);
}

simba_status simba_semaphore_try_acquire(simba_handle client, const char *name, int32_t permits, int64_t timeout_ms,
                                         simba_handle cancel, simba_handle *out_term) {
	CHECK_FORK();
	return simbago_semaphore_try_acquire(client, (char *)name, permits, timeout_ms, cancel, out_term);
}

simba_status simba_lock_release(simba_handle term, int64_t timeout_ms) {
	CHECK_FORK();
	return simbago_lock_release(term, timeout_ms);
}

simba_status simba_term_free(simba_handle term) {
	CHECK_FORK();
	return simbago_term_free(term);
}

simba_status simba_term_token(simba_handle term, uint64_t *out_token) {
	CHECK_FORK();
	return simbago_term_token(term, out_token);
}

simba_status simba_term_valid(simba_handle term, int *out_valid) {
	if (forked && out_valid != NULL) {
		*out_valid = 0; /* never a valid term in a forked child */
	}
	CHECK_FORK();
	return simbago_term_valid(term, out_valid);
}

simba_status simba_term_remaining_ms(simba_handle term, int64_t *out_ms) {
	if (forked && out_ms != NULL) {
		*out_ms = 0;
	}
	CHECK_FORK();
	return simbago_term_remaining_ms(term, out_ms);
}

simba_status simba_term_ensure_valid(simba_handle term, int64_t min_ms) {
	CHECK_FORK();
	return simbago_term_ensure_valid(term, min_ms);
}

simba_status simba_term_reason(simba_handle term, simba_reason *out_reason) {
	CHECK_FORK();
	return simbago_term_reason(term, out_reason);
}

simba_status simba_term_wait_end(simba_handle term, int64_t timeout_ms) {
	CHECK_FORK();
	return simbago_term_wait_end(term, timeout_ms);
}

simba_status simba_lease_holder(simba_handle client, const char *name, int64_t timeout_ms, simba_handle cancel,
                                int *out_held, simba_holder *out) {
	CHECK_FORK();
	return simbago_lease_holder(client, (char *)name, timeout_ms, cancel, out_held, out);
}

simba_status simba_run_while_leader(simba_handle client, const char *name, simba_work_fn work, void *user_data,
                                    int64_t timeout_ms, simba_handle cancel) {
	CHECK_FORK();
	return simbago_run_while_leader(client, (char *)name, work, user_data, timeout_ms, cancel);
}

simba_status simba_group_run(simba_handle client, const char *name, int32_t partitions, simba_partition_fn work,
                             void *user_data, int64_t timeout_ms, simba_handle cancel) {
	CHECK_FORK();
	return simbago_group_run(client, (char *)name, partitions, work, user_data, timeout_ms, cancel);
}

simba_status simba_events_subscribe(simba_handle client, int32_t capacity, simba_handle *out_events) {
	CHECK_FORK();
	return simbago_events_subscribe(client, capacity, out_events);
}

simba_status simba_events_next(simba_handle events, int64_t timeout_ms, simba_event *out) {
	CHECK_FORK();
	return simbago_events_next(events, timeout_ms, out);
}

simba_status simba_events_dropped(simba_handle events, uint64_t *out_dropped) {
	CHECK_FORK();
	return simbago_events_dropped(events, out_dropped);
}

simba_status simba_events_free(simba_handle events) {
	CHECK_FORK();
	return simbago_events_free(events);
}

simba_status simba_election_start(simba_handle client, const char *name, const simba_listener *listener,
                                  simba_handle *out_election) {
	CHECK_FORK();
	return simbago_election_start(client, (char *)name, (simba_listener *)listener, NULL, out_election);
}

simba_status simba_election_start_ex(simba_handle client, const char *name, const simba_listener *listener,
                                     simba_release_fn release, simba_handle *out_election) {
	CHECK_FORK();
	return simbago_election_start(client, (char *)name, (simba_listener *)listener, release, out_election);
}

simba_status simba_election_step_down(simba_handle election, int64_t cooldown_ms, int64_t timeout_ms) {
	CHECK_FORK();
	return simbago_election_step_down(election, cooldown_ms, timeout_ms);
}

simba_status simba_election_stop(simba_handle election, int64_t timeout_ms) {
	CHECK_FORK();
	return simbago_election_stop(election, timeout_ms);
}

simba_status simba_cancel_new(simba_handle *out_cancel) {
	CHECK_FORK();
	return simbago_cancel_new(out_cancel);
}

simba_status simba_cancel(simba_handle cancel) {
	CHECK_FORK();
	return simbago_cancel(cancel);
}

simba_status simba_cancel_free(simba_handle cancel) {
	CHECK_FORK();
	return simbago_cancel_free(cancel);
}
