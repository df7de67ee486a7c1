// Command libsimba is the C API of Simba for Go, built by scripts/build.sh
// (make libsimba at the root of the repository), which runs
//
//	go build -buildmode=c-shared -trimpath \
//		-ldflags=-extldflags=-Wl,--version-script=$PWD/libsimba.map \
//		-o build/libsimba.so .
//
// and also installs build/simba.h and build/simba.pc; without the version
// script every Go and cgo symbol would leave the library. include/simba.h
// is the contract: one documented header with stable names, integer
// handles, one status enum and a thread-local last error. The functions of
// simba.h are defined in bridge.c, which refuses every call in a forked
// child (the Go runtime does not survive a fork) and calls the exports of
// this package, simbago_*, local to the library (libsimba.map). They
// convert C values and call internal/capi, which holds the handles and the
// logic; every export recovers from panics, so none crosses the boundary.
//
// The library links the in-memory backend and every backend of the
// project, so simba_client_open opens memory://, redis://, rediss://,
// postgres://, postgresql://, mysql:// and zk:// URLs.
package main

/*
#cgo CFLAGS: -O2 -Wall
#include <stdlib.h>
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	_ "github.com/simba-go/simba/backend-jdbc/mysql"    // registers mysql://
	_ "github.com/simba-go/simba/backend-jdbc/postgres" // registers postgres://, postgresql://
	_ "github.com/simba-go/simba/backend-redis"         // registers redis://, rediss://
	_ "github.com/simba-go/simba/backend-zk"            // registers zk://
	_ "github.com/simba-go/simba/core/memory"           // registers memory://

	"github.com/simba-go/simba/cgo-bindings/internal/capi"
)

func main() {} // a c-shared library has no main

// fail records err as the calling thread's last error and returns its
// status.
func fail(err error) C.simba_status {
	msg := capi.Redact(err.Error())
	p := C.CString(msg)
	C.simba_bridge_set_error(p, C.size_t(len(msg)))
	C.free(unsafe.Pointer(p))
	return C.simba_status(capi.StatusOf(err))
}

// result returns SIMBA_OK for nil, and records err otherwise.
func result(err error) C.simba_status {
	if err == nil {
		return C.SIMBA_OK
	}
	return fail(err)
}

// integer constrains the handles and numbers an export stores in an
// output parameter.
type integer interface {
	~int | ~int32 | ~int64 | ~uint32 | ~uint64
}

// store puts v, converted, in *out and returns SIMBA_OK; for a non-nil err
// it leaves *out alone and records err.
func store[T, V integer](out *T, v V, err error) C.simba_status {
	if err != nil {
		return fail(err)
	}
	*out = T(v)
	return C.SIMBA_OK
}

// output refuses a NULL out, named name in the header, before get runs,
// and stores what get returns in *out.
func output[T, V integer](out *T, name string, get func() (V, error)) C.simba_status {
	if out == nil {
		return nullArg(name)
	}
	v, err := get()
	return store(out, v, err)
}

// guard, deferred by every export, turns a panic into SIMBA_ERR_INTERNAL.
func guard(st *C.simba_status) {
	if err := capi.Recovered(recover()); err != nil {
		*st = fail(err)
	}
}

func nullArg(name string) C.simba_status {
	return fail(fmt.Errorf("%w: %s is NULL", capi.ErrInvalidArgument, name))
}

// param is a pointer parameter of an export: its name in simba.h, and
// whether the caller passed NULL.
type param struct {
	name string
	null bool
}

// nonNull records the first of params that is NULL and returns its
// status, SIMBA_OK when none is.
func nonNull(params ...param) C.simba_status {
	for _, p := range params {
		if p.null {
			return nullArg(p.name)
		}
	}
	return C.SIMBA_OK
}

// callback is the id of the callback running on this thread, 0 if none.
func callback() uint64 { return uint64(C.simba_bridge_current_callback()) }

//export simbago_stats_get
func simbago_stats_get(out *C.simba_stats) (st C.simba_status) {
	defer guard(&st)
	if out == nil {
		return nullArg("out")
	}
	c := capi.HandleCounts()
	out.clients = C.int64_t(c.Clients)
	out.terms = C.int64_t(c.Terms)
	out.elections = C.int64_t(c.Elections)
	out.cancels = C.int64_t(c.Cancels)
	out.goroutines = C.int64_t(capi.Goroutines())
	return C.SIMBA_OK
}

// options reads the fields of o that its size covers.
func options(o *C.simba_options) (capi.Options, error) {
	var opts capi.Options
	if o == nil {
		return opts, nil
	}
	size := uintptr(o.size)
	if size < unsafe.Sizeof(o.size) || size > 1<<16 {
		return opts, fmt.Errorf("%w: options size %d: set it to sizeof(simba_options)", capi.ErrInvalidArgument, size)
	}
	has := func(off, n uintptr) bool { return size >= off+n }
	if has(unsafe.Offsetof(o.lease_ms), 8) {
		opts.LeaseMS = int64(o.lease_ms)
	}
	if has(unsafe.Offsetof(o.renew_ms), 8) {
		opts.RenewMS = int64(o.renew_ms)
	}
	if has(unsafe.Offsetof(o.identity), unsafe.Sizeof(o.identity)) && o.identity != nil {
		opts.Identity = C.GoString(o.identity)
	}
	if has(unsafe.Offsetof(o.open_timeout_ms), 8) {
		opts.OpenTimeoutMS = int64(o.open_timeout_ms)
	}
	return opts, nil
}

//export simbago_client_open
func simbago_client_open(url *C.char, o *C.simba_options, out *C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	if st := nonNull(param{"url", url == nil}, param{"out_client", out == nil}); st != C.SIMBA_OK {
		return st
	}
	opts, err := options(o)
	if err != nil {
		return fail(err)
	}
	h, err := capi.OpenClient(C.GoString(url), opts)
	return store(out, h, err)
}

//export simbago_client_close
func simbago_client_close(client C.simba_handle, timeoutMS C.int64_t) (st C.simba_status) {
	defer guard(&st)
	return result(capi.CloseClient(uint64(client), int64(timeoutMS), callback()))
}

//export simbago_client_snapshot
func simbago_client_snapshot(client C.simba_handle, out **C.char) (st C.simba_status) {
	defer guard(&st)
	if out == nil {
		return nullArg("out_json")
	}
	b, err := capi.Snapshot(uint64(client))
	if err != nil {
		return fail(err)
	}
	*out = C.CString(string(b))
	return C.SIMBA_OK
}

func acquire(client C.simba_handle, name *C.char, timeoutMS C.int64_t, cancel C.simba_handle, out *C.simba_handle, try bool) C.simba_status {
	if st := nonNull(param{"name", name == nil}, param{"out_term", out == nil}); st != C.SIMBA_OK {
		return st
	}
	h, err := capi.Acquire(uint64(client), C.GoString(name), int64(timeoutMS), uint64(cancel), try)
	return store(out, h, err)
}

//export simbago_lock_acquire
func simbago_lock_acquire(client C.simba_handle, name *C.char, timeoutMS C.int64_t, cancel C.simba_handle, out *C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return acquire(client, name, timeoutMS, cancel, out, false)
}

//export simbago_lock_try_acquire
func simbago_lock_try_acquire(client C.simba_handle, name *C.char, timeoutMS C.int64_t, cancel C.simba_handle, out *C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return acquire(client, name, timeoutMS, cancel, out, true)
}

func acquirePermit(client C.simba_handle, name *C.char, permits C.int32_t, timeoutMS C.int64_t, cancel C.simba_handle, out *C.simba_handle, try bool) C.simba_status {
	if st := nonNull(param{"name", name == nil}, param{"out_term", out == nil}); st != C.SIMBA_OK {
		return st
	}
	h, err := capi.AcquirePermit(uint64(client), C.GoString(name), int64(permits), int64(timeoutMS), uint64(cancel), try)
	return store(out, h, err)
}

//export simbago_semaphore_acquire
func simbago_semaphore_acquire(client C.simba_handle, name *C.char, permits C.int32_t, timeoutMS C.int64_t, cancel C.simba_handle, out *C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return acquirePermit(client, name, permits, timeoutMS, cancel, out, false)
}

//export simbago_semaphore_try_acquire
func simbago_semaphore_try_acquire(client C.simba_handle, name *C.char, permits C.int32_t, timeoutMS C.int64_t, cancel C.simba_handle, out *C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return acquirePermit(client, name, permits, timeoutMS, cancel, out, true)
}

//export simbago_lock_release
func simbago_lock_release(term C.simba_handle, timeoutMS C.int64_t) (st C.simba_status) {
	defer guard(&st)
	return result(capi.Release(uint64(term), int64(timeoutMS)))
}

//export simbago_term_free
func simbago_term_free(term C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return result(capi.FreeTerm(uint64(term)))
}

//export simbago_term_token
func simbago_term_token(term C.simba_handle, out *C.uint64_t) (st C.simba_status) {
	defer guard(&st)
	return output(out, "out_token", func() (uint64, error) { return capi.Token(uint64(term)) })
}

//export simbago_term_valid
func simbago_term_valid(term C.simba_handle, out *C.int) (st C.simba_status) {
	defer guard(&st)
	return output(out, "out_valid", func() (int32, error) {
		v, err := capi.Valid(uint64(term))
		if v {
			return 1, err
		}
		return 0, err
	})
}

//export simbago_term_remaining_ms
func simbago_term_remaining_ms(term C.simba_handle, out *C.int64_t) (st C.simba_status) {
	defer guard(&st)
	return output(out, "out_ms", func() (int64, error) { return capi.RemainingMS(uint64(term)) })
}

//export simbago_term_ensure_valid
func simbago_term_ensure_valid(term C.simba_handle, minMS C.int64_t) (st C.simba_status) {
	defer guard(&st)
	return result(capi.EnsureValid(uint64(term), int64(minMS)))
}

//export simbago_term_reason
func simbago_term_reason(term C.simba_handle, out *C.simba_reason) (st C.simba_status) {
	defer guard(&st)
	return output(out, "out_reason", func() (int32, error) { return capi.Reason(uint64(term)) })
}

// listener calls the C callbacks of a simba_listener, and its release
// function.
type listener struct {
	elected  C.simba_elected_fn
	revoked  C.simba_revoked_fn
	release  C.simba_release_fn
	userData unsafe.Pointer // the caller's, never a Go pointer
}

func (l *listener) Released() {
	if l.release != nil {
		C.simba_bridge_call_release(l.release, l.userData)
	}
}

func (l *listener) Elected(election, term, token, cb uint64) {
	if l.elected != nil {
		C.simba_bridge_call_elected(l.elected, l.userData, C.simba_handle(election), C.simba_handle(term), C.uint64_t(token), C.uint64_t(cb))
	}
}

func (l *listener) Revoked(election, term, token uint64, reason int32, cb uint64) {
	if l.revoked != nil {
		C.simba_bridge_call_revoked(l.revoked, l.userData, C.simba_handle(election), C.simba_handle(term), C.uint64_t(token), C.simba_reason(reason), C.uint64_t(cb))
	}
}

//export simbago_election_start
func simbago_election_start(client C.simba_handle, name *C.char, l *C.simba_listener, release C.simba_release_fn, out *C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	if st := nonNull(param{"name", name == nil}, param{"listener", l == nil}, param{"out_election", out == nil}); st != C.SIMBA_OK {
		return st
	}
	h, err := capi.StartElection(uint64(client), C.GoString(name), &listener{elected: l.on_elected, revoked: l.on_revoked, release: release, userData: l.user_data})
	return store(out, h, err)
}

//export simbago_election_step_down
func simbago_election_step_down(election C.simba_handle, cooldownMS, timeoutMS C.int64_t) (st C.simba_status) {
	defer guard(&st)
	return result(capi.StepDown(uint64(election), int64(cooldownMS), int64(timeoutMS), callback()))
}

//export simbago_election_stop
func simbago_election_stop(election C.simba_handle, timeoutMS C.int64_t) (st C.simba_status) {
	defer guard(&st)
	return result(capi.StopElection(uint64(election), int64(timeoutMS), callback()))
}

//export simbago_cancel_new
func simbago_cancel_new(out *C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return output(out, "out_cancel", func() (uint64, error) { return capi.NewCancel(), nil })
}

//export simbago_cancel
func simbago_cancel(cancel C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return result(capi.Cancel(uint64(cancel)))
}

//export simbago_cancel_free
func simbago_cancel_free(cancel C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return result(capi.FreeCancel(uint64(cancel)))
}

//export simbago_stats_events
func simbago_stats_events(out *C.int64_t) (st C.simba_status) {
	defer guard(&st)
	return output(out, "out", func() (int, error) { return capi.HandleCounts().Events, nil })
}

//export simbago_term_wait_end
func simbago_term_wait_end(term C.simba_handle, timeoutMS C.int64_t) (st C.simba_status) {
	defer guard(&st)
	return result(capi.WaitEnd(uint64(term), int64(timeoutMS)))
}

// sized refuses a struct whose size field does not cover the version of
// this library, which fills every field.
func sized(what string, size C.uint32_t, want uintptr) error {
	if uintptr(size) < want || size > 1<<16 {
		return fmt.Errorf("%w: %s size %d: set it to sizeof(%s) (%d)", capi.ErrInvalidArgument, what, size, what, want)
	}
	return nil
}

// cString is a string for C, NULL for "": the caller frees it.
func cString(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s)
}

//export simbago_lease_holder
func simbago_lease_holder(client C.simba_handle, name *C.char, timeoutMS C.int64_t, cancel C.simba_handle, outHeld *C.int, out *C.simba_holder) (st C.simba_status) {
	defer guard(&st)
	if st := nonNull(param{"name", name == nil}, param{"out_held", outHeld == nil}, param{"out", out == nil}); st != C.SIMBA_OK {
		return st
	}
	if err := sized("simba_holder", out.size, unsafe.Sizeof(*out)); err != nil {
		return fail(err)
	}
	size := out.size
	*out = C.simba_holder{size: size}
	*outHeld = 0
	h, ok, err := capi.Holder(uint64(client), C.GoString(name), int64(timeoutMS), uint64(cancel))
	if err != nil {
		return fail(err)
	}
	if ok {
		*outHeld = 1
		out.token = C.uint64_t(h.Token)
		if !h.Since.IsZero() {
			out.since_unix_ns = C.int64_t(h.Since.UnixNano())
		}
		out.session = cString(string(h.Session))
		out.identity = cString(h.Identity)
	}
	return C.SIMBA_OK
}

// work calls a simba_work_fn or a simba_partition_fn.
func work(fn C.simba_work_fn, pfn C.simba_partition_fn, userData unsafe.Pointer) capi.Work {
	return func(partition int, term, token, cb uint64) capi.Status {
		if pfn != nil {
			return capi.Status(C.simba_bridge_call_partition(pfn, userData, C.int32_t(partition), C.simba_handle(term), C.uint64_t(token), C.uint64_t(cb)))
		}
		return capi.Status(C.simba_bridge_call_work(fn, userData, C.simba_handle(term), C.uint64_t(token), C.uint64_t(cb)))
	}
}

//export simbago_run_while_leader
func simbago_run_while_leader(client C.simba_handle, name *C.char, fn C.simba_work_fn, userData unsafe.Pointer, timeoutMS C.int64_t, cancel C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	if st := nonNull(param{"name", name == nil}, param{"work", fn == nil}); st != C.SIMBA_OK {
		return st
	}
	return result(capi.RunWhileLeader(uint64(client), C.GoString(name), int64(timeoutMS), uint64(cancel), work(fn, nil, userData)))
}

//export simbago_group_run
func simbago_group_run(client C.simba_handle, name *C.char, partitions C.int32_t, fn C.simba_partition_fn, userData unsafe.Pointer, timeoutMS C.int64_t, cancel C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	if st := nonNull(param{"name", name == nil}, param{"work", fn == nil}); st != C.SIMBA_OK {
		return st
	}
	return result(capi.GroupRun(uint64(client), C.GoString(name), int64(partitions), int64(timeoutMS), uint64(cancel), work(nil, fn, userData)))
}

//export simbago_events_subscribe
func simbago_events_subscribe(client C.simba_handle, capacity C.int32_t, out *C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return output(out, "out_events", func() (uint64, error) { return capi.SubscribeEvents(uint64(client), int64(capacity)) })
}

//export simbago_events_next
func simbago_events_next(events C.simba_handle, timeoutMS C.int64_t, out *C.simba_event) (st C.simba_status) {
	defer guard(&st)
	if out == nil {
		return nullArg("out")
	}
	if err := sized("simba_event", out.size, unsafe.Sizeof(*out)); err != nil {
		return fail(err)
	}
	size := out.size
	*out = C.simba_event{size: size}
	e, err := capi.NextEvent(uint64(events), int64(timeoutMS))
	if err != nil {
		return fail(err)
	}
	out.kind = C.simba_event_kind(e.Kind)
	if !e.Time.IsZero() {
		out.time_unix_ns = C.int64_t(e.Time.UnixNano())
	}
	out.token = C.uint64_t(e.Token)
	out.reason = C.simba_reason(e.Reason)
	if e.Lock {
		out.lock = 1
	}
	out.granted_ns = C.int64_t(e.Granted)
	out.latency_ns = C.int64_t(e.Latency)
	out.waited_ns = C.int64_t(e.Waited)
	out.dropped = C.int64_t(e.Dropped)
	out.session = cString(string(e.Session))
	out.name = cString(e.Name)
	if e.Err != nil {
		out.error = cString(capi.Redact(e.Err.Error()))
	}
	out.warning_code = cString(e.Warning.Code)
	out.warning_message = cString(capi.Redact(e.Warning.Message))
	return C.SIMBA_OK
}

//export simbago_events_dropped
func simbago_events_dropped(events C.simba_handle, out *C.uint64_t) (st C.simba_status) {
	defer guard(&st)
	return output(out, "out_dropped", func() (uint64, error) { return capi.EventsDropped(uint64(events)) })
}

//export simbago_events_free
func simbago_events_free(events C.simba_handle) (st C.simba_status) {
	defer guard(&st)
	return result(capi.FreeEvents(uint64(events)))
}
