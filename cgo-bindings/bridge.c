/* The C side of libsimba (see bridge.h): what must live on the calling
 * thread rather than in Go, where a goroutine may move between threads. */
#include <stdlib.h>
#include <string.h>

#include "bridge.h"

/* The message of the last failed call of this thread, NUL-terminated. */
static __thread char *last_error;
static __thread size_t last_error_len;

/* The id of the callback running on this thread, 0 when none: a call a
 * callback makes into the library passes it to the engine, so that stopping
 * the election from its own callback does not wait for that callback. */
static __thread uint64_t current_callback;

void simba_bridge_set_error(const char *msg, size_t len) {
	char *copy = malloc(len + 1);
	if (copy == NULL) {
		return; /* keep the previous message rather than fail the call */
	}
	memcpy(copy, msg, len);
	copy[len] = '\0';
	free(last_error);
	last_error = copy;
	last_error_len = len;
}

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

uint64_t simba_bridge_current_callback(void) { return current_callback; }

/* The public functions that need no Go. */

const char *simba_version(void) { return SIMBA_VERSION; }

int32_t simba_abi_version(void) { return SIMBA_ABI_VERSION; }

simba_status simba_last_error(char *buf, size_t len, size_t *out_len) {
	const char *msg = last_error != NULL ? last_error : "";
	size_t n = last_error != NULL ? last_error_len : 0;
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
	if (last_error == NULL) {
		return NULL;
	}
	char *copy = malloc(last_error_len + 1);
	if (copy != NULL) {
		memcpy(copy, last_error, last_error_len + 1);
	}
	return copy;
}

void simba_string_free(char *s) { free(s); }
