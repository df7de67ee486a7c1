// Package capi is the Go side of the C API of libsimba: a table of integer
// handles for clients, terms, elections and cancel handles, the validation
// of every argument that comes from C, and the mapping of errors to the
// status codes of simba.h. It has no cgo: the exported functions of the
// library (package main of this module) convert C values and call it, so
// everything here is tested and fuzzed from plain Go tests.
//
// Every function returns an error that carries its status (StatusOf); no
// function panics on any input, and none leaves a goroutine behind once
// the handles it created are closed or freed.
package capi

import (
	"context"
	"errors"
	"fmt"

	simba "github.com/simba-go/simba/core"
)

// Status is a status code of the C API. The values are the SIMBA_* codes of
// simba.h and never change meaning; new codes are only added.
type Status int32

// The status codes, as in simba.h.
const (
	OK                 Status = 0  // SIMBA_OK
	InvalidArgument    Status = 1  // SIMBA_ERR_INVALID_ARGUMENT: NULL pointer, bad UTF-8, bad timeout or size
	InvalidName        Status = 2  // SIMBA_ERR_INVALID_NAME: a lease name outside R-NAME-1
	InvalidURL         Status = 3  // SIMBA_ERR_INVALID_URL: unusable or unknown backend URL
	InvalidConfig      Status = 4  // SIMBA_ERR_INVALID_CONFIG: lease and renew do not fit together
	BadHandle          Status = 5  // SIMBA_ERR_BAD_HANDLE: unknown, freed or of another kind
	LockTimeout        Status = 6  // SIMBA_ERR_LOCK_TIMEOUT: no term within the timeout
	LockHeld           Status = 7  // SIMBA_ERR_LOCK_HELD: try-acquire found the lease held
	BackendUnavailable Status = 8  // SIMBA_ERR_BACKEND_UNAVAILABLE: the backend could not be asked
	Closed             Status = 9  // SIMBA_ERR_CLOSED: the client is closed
	Cancelled          Status = 10 // SIMBA_ERR_CANCELLED: the cancel handle was cancelled
	TermExpired        Status = 11 // SIMBA_ERR_TERM_EXPIRED: ensure_valid failed
	AlreadyStarted     Status = 12 // SIMBA_ERR_ALREADY_STARTED: the election runs on this client
	NotStarted         Status = 13 // SIMBA_ERR_NOT_STARTED: the election is not started
	NameInUse          Status = 14 // SIMBA_ERR_NAME_IN_USE: the name is a lock and an election
	BufferTooSmall     Status = 15 // SIMBA_ERR_BUFFER_TOO_SMALL: the caller's buffer is too short
	Timeout            Status = 16 // SIMBA_ERR_TIMEOUT: a wait (stop, close) ended before its end
	Backend            Status = 17 // SIMBA_ERR_BACKEND: another error of the backend
	Internal           Status = 18 // SIMBA_ERR_INTERNAL: a bug of the library (a recovered panic)
	Forked             Status = 19 // SIMBA_ERR_FORKED: a call in a forked child (answered by bridge.c, never by Go)
	PermitsMismatch    Status = 20 // SIMBA_ERR_PERMITS_MISMATCH: the semaphore is held with another number of permits

	// LastStatus is the highest status code.
	LastStatus = PermitsMismatch
)

var statusNames = [...]string{
	"SIMBA_OK", "SIMBA_ERR_INVALID_ARGUMENT", "SIMBA_ERR_INVALID_NAME", "SIMBA_ERR_INVALID_URL",
	"SIMBA_ERR_INVALID_CONFIG", "SIMBA_ERR_BAD_HANDLE", "SIMBA_ERR_LOCK_TIMEOUT", "SIMBA_ERR_LOCK_HELD",
	"SIMBA_ERR_BACKEND_UNAVAILABLE", "SIMBA_ERR_CLOSED", "SIMBA_ERR_CANCELLED", "SIMBA_ERR_TERM_EXPIRED",
	"SIMBA_ERR_ALREADY_STARTED", "SIMBA_ERR_NOT_STARTED", "SIMBA_ERR_NAME_IN_USE",
	"SIMBA_ERR_BUFFER_TOO_SMALL", "SIMBA_ERR_TIMEOUT", "SIMBA_ERR_BACKEND", "SIMBA_ERR_INTERNAL",
	"SIMBA_ERR_FORKED", "SIMBA_ERR_PERMITS_MISMATCH",
}

// String returns the name of the code in simba.h.
func (s Status) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return fmt.Sprintf("SIMBA_STATUS(%d)", int32(s))
	}
	return statusNames[s]
}

// Sentinels of the errors this package makes itself; the others wrap the
// sentinels of the simba package.
var (
	// ErrInvalidArgument is matched by errors about an argument from C: a
	// NULL pointer, a string that is not UTF-8, a negative timeout.
	ErrInvalidArgument = errors.New("capi: invalid argument")

	// ErrBadHandle is matched by errors about a handle that is unknown,
	// already freed, or of another kind than the call takes.
	ErrBadHandle = errors.New("capi: bad handle")

	// ErrBufferTooSmall is matched when the caller's buffer cannot hold the
	// answer.
	ErrBufferTooSmall = errors.New("capi: buffer too small")

	// ErrInternal is matched by the error of a recovered panic.
	ErrInternal = errors.New("capi: internal error")
)

// sentinels pairs the sentinel errors with their status codes, in the
// order StatusOf tries them. The first sentinel of a status is the one
// workFailed wraps.
var sentinels = []struct {
	err    error
	status Status
}{
	// Refused arguments.
	{ErrInvalidArgument, InvalidArgument}, {simba.ErrInvalidArgument, InvalidArgument},
	{simba.ErrInvalidName, InvalidName},
	{simba.ErrInvalidURL, InvalidURL}, {simba.ErrUnknownScheme, InvalidURL},
	{simba.ErrInvalidConfig, InvalidConfig},
	{ErrBadHandle, BadHandle}, {ErrBufferTooSmall, BufferTooSmall}, {ErrInternal, Internal},
	// Outcomes, the specific before the general.
	{simba.ErrClosed, Closed}, {simba.ErrBackendUnavailable, BackendUnavailable}, {context.Canceled, Cancelled},
	{simba.ErrLockHeld, LockHeld}, {simba.ErrLockTimeout, LockTimeout}, {simba.ErrTermExpired, TermExpired},
	{simba.ErrAlreadyStarted, AlreadyStarted}, {simba.ErrNotStarted, NotStarted}, {simba.ErrNameInUse, NameInUse},
	{simba.ErrPermitsMismatch, PermitsMismatch}, {context.DeadlineExceeded, Timeout},
}

// StatusOf returns the status code of err: OK for nil, else the code of
// the first sentinel err matches, in an order that puts the specific
// before the general (an acquisition that timed out during an outage is
// BackendUnavailable, a cancelled one Cancelled, although both also match
// simba.ErrLockTimeout).
func StatusOf(err error) Status {
	if err == nil {
		return OK
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.status
		}
	}
	return Backend
}

// Recovered turns the value of recover() into an error matching
// ErrInternal, or nil for nil.
func Recovered(v any) error {
	if v == nil {
		return nil
	}
	return fmt.Errorf("%w: panic: %v", ErrInternal, v)
}
