/* The private C side of libsimba: the thread-local last error, the calls
 * of the C callbacks, and the public functions, which check that the
 * process was not forked before they call the Go side (simbago_*, local to
 * the library through libsimba.map). Not part of the public API: every
 * symbol of this header is hidden. */
#ifndef SIMBA_BRIDGE_H
#define SIMBA_BRIDGE_H

#define SIMBA_NO_PROTOTYPES
#include "include/simba.h"
#undef SIMBA_NO_PROTOTYPES

#define SIMBA_HIDDEN __attribute__((visibility("hidden")))

SIMBA_HIDDEN void simba_bridge_set_error(const char *msg, size_t len);
SIMBA_HIDDEN void simba_bridge_call_elected(simba_elected_fn fn, void *user_data, simba_handle election,
                                            simba_handle term, uint64_t token, uint64_t callback);
SIMBA_HIDDEN void simba_bridge_call_revoked(simba_revoked_fn fn, void *user_data, simba_handle election,
                                            simba_handle term, uint64_t token, simba_reason reason,
                                            uint64_t callback);
SIMBA_HIDDEN void simba_bridge_call_release(simba_release_fn fn, void *user_data);
SIMBA_HIDDEN simba_status simba_bridge_call_work(simba_work_fn fn, void *user_data, simba_handle term, uint64_t token,
                                                 uint64_t callback);
SIMBA_HIDDEN simba_status simba_bridge_call_partition(simba_partition_fn fn, void *user_data, int32_t partition,
                                                      simba_handle term, uint64_t token, uint64_t callback);
SIMBA_HIDDEN uint64_t simba_bridge_current_callback(void);

#endif
