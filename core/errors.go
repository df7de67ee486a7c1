package simba

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of these
// or is a *NameError or *ConfigError, so callers can test with errors.Is.
var (
	// ErrClosed is returned by calls on a client that has been closed.
	ErrClosed = errors.New("simba: client closed")

	// ErrTermExpired is returned by Term.EnsureValid when the term has
	// ended or will not stay valid for the asked duration (R-TERM-5).
	ErrTermExpired = errors.New("simba: term expired")

	// ErrLockTimeout is returned by Lock.Acquire when no term was won
	// before the context was done (R-LOCK-1), and by Lock.TryAcquire when
	// no attempt was answered within its wait (R-LOCK-3). When the backend
	// was unreachable meanwhile, the error matches ErrBackendUnavailable
	// too.
	ErrLockTimeout = errors.New("simba: lock timeout")

	// ErrLockHeld is returned by Lock.TryAcquire when the lease is held by
	// another session, as the backend answered, or by this client
	// (R-LOCK-3). It never stands for a backend that could not be asked.
	ErrLockHeld = errors.New("simba: lock held")

	// ErrBackendUnavailable is matched by the error of Lock.Acquire and
	// Lock.TryAcquire when their deadline passed while the backend could
	// not be asked: the client had no live session (none could be opened,
	// or its last keep-alive failed), or every attempt made during the
	// wait failed with a backend error. It says nothing about whether
	// another session holds the lease. Such an error still matches
	// ErrLockTimeout and context.DeadlineExceeded: the wait timed out.
	ErrBackendUnavailable = errors.New("simba: backend unavailable")

	// ErrAlreadyStarted is returned by Election.Start when the election is
	// already started on this client (R-CB-4).
	ErrAlreadyStarted = errors.New("simba: election already started")

	// ErrNotStarted is returned by Election.Stop and Election.StepDown on
	// an election that is not started. ErrClientNotStarted matches it too.
	ErrNotStarted = errors.New("simba: election not started")

	// ErrClientNotStarted is returned at once, with no backend call, by
	// the calls that contend for a lease or ask the backend (Lock.Acquire,
	// Lock.TryAcquire, Election.Start, RunWhileLeader, Schedule, Group.Run,
	// Client.Holder, Client.ObserveHolder, Client.Sweep) on a client built
	// WithDeferredStart before its Start. It matches ErrNotStarted too.
	ErrClientNotStarted error = clientNotStarted{}

	// ErrNameInUse is returned when one client uses a name both as a lock
	// and as an election: they would share one lease (R-LOCK-8).
	ErrNameInUse = errors.New("simba: name already used by a lock or an election of this client")

	// ErrPermitsMismatch is matched by the error of a semaphore's Acquire
	// or TryAcquire when the semaphore is in use with another number of
	// permits: a live session holds one of its permits, granted under the
	// number the backend recorded. It is not retried: every holder must
	// ask with the same number.
	ErrPermitsMismatch = errors.New("simba: semaphore is in use with another number of permits")

	// ErrInvalidArgument is wrapped by errors about nil listeners, nil
	// functions and negative durations.
	ErrInvalidArgument = errors.New("simba: invalid argument")
)

// WorkError reports leader work that failed while its term lasted: it
// returned an error or panicked. RunWhileLeader and Group.Run return it
// (unless StepDownOnError is given), and EventWorkFailed carries it.
type WorkError struct {
	Name  string // the lease name of the term
	Token uint64 // the term's token
	Panic any    // the value the work panicked with, or nil
	Err   error  // the work's error, or one that describes the panic
}

func (e *WorkError) Error() string {
	return fmt.Sprintf("simba: leader work on %s token %d failed: %v", e.Name, e.Token, e.Err)
}

func (e *WorkError) Unwrap() error { return e.Err }

// clientNotStarted is the type of ErrClientNotStarted.
type clientNotStarted struct{}

func (clientNotStarted) Error() string {
	return "simba: client not started: call Client.Start first (under fxsimba the client starts in its " +
		"start hook: take locks in a start hook registered after it, or in leader work)"
}

// Is makes errors.Is(err, ErrNotStarted) true for ErrClientNotStarted.
func (clientNotStarted) Is(target error) bool { return target == ErrNotStarted }
