// Package fencingtest is a test kit for resources protected by fencing
// tokens.
//
// A term's validity cannot stop a holder that was paused and woke up after
// losing its lease; only the protected resource can refuse its late write.
// The resource must accept a write only if its token is at least the
// highest token it has accepted, record that token, and do both in one
// atomic step; equal tokens are accepted because retries within one term
// carry the same token (R-FEN-1). This kit checks that a resource does so.
//
// Wrap your resource in the small [Resource] interface and call [Run] from
// a test (the recipes of this project do the same in their own tests):
//
//	func TestLedgerFencing(t *testing.T) {
//		fencingtest.Run(t, func(t testing.TB) fencingtest.Resource {
//			return newLedgerAdapter(t) // a fresh row, file, account...
//		})
//	}
//
// [Run] runs one subtest per check, each with a fresh resource:
//
//   - FreshState: a fresh resource reports token 0 and an empty value.
//   - HigherToken: higher tokens are accepted, gaps included (Zookeeper
//     tokens are not consecutive), and the last value is stored.
//   - EqualToken: an equal token is accepted, with the same value (a plain
//     retry) and with a new one (a second write in the same term).
//   - LowerToken: a lower token is rejected and leaves token and value
//     unchanged.
//   - ZeroToken: token 0 never overwrites a fenced write.
//   - LargeTokens: tokens are compared exactly up to math.MaxInt64, so a
//     resource that stores them in a float or a 32-bit column fails.
//   - Atomic: 50 rounds of 16 goroutines that each write one token and
//     read the state back, with the tokens handed out out of order. No
//     call may see a token lower than one a finished call already saw or
//     had accepted, a lower token must be refused once a higher one was
//     accepted, the value must always belong to the token read with it,
//     and after each round the state must be the round's highest write.
//   - Durable: for resources that implement [Durable], the highest token
//     and its value survive a reopen and still fence writes.
//
// Simba never issues token 0 (R-TERM-2) and every backend stores tokens as
// signed 64-bit integers, so the kit only writes tokens from 1 to
// math.MaxInt64, plus token 0 in ZeroToken. A fresh resource may accept or
// refuse token 0, but once it has accepted token 1 it must refuse 0: a
// zero token usually means a write that was never fenced at all.
//
// The kit never panics on a misbehaving resource: errors and panics from
// Write, State or Reopen fail the check that saw them, with the call and the
// broken property in the message. [Check] runs the same checks without a
// testing.T and returns the failures, for tools and for testing the kit
// itself.
package fencingtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// Resource is the protected resource under test, seen through a small
// adapter: it stores one value and the highest token it accepted.
type Resource interface {
	// Write stores value and records token if token is at least the
	// highest token accepted so far, in one atomic step, and reports
	// whether it did. A stale write returns false and a nil error.
	Write(ctx context.Context, token uint64, value string) (accepted bool, err error)

	// State returns the highest accepted token and the value stored by the
	// last accepted write, read together: token 0 and "" before the first
	// accepted write.
	State(ctx context.Context) (token uint64, value string, err error)
}

// Durable is implemented by resources whose state must survive a restart,
// such as a database row. Reopen returns a new handle on the same stored
// state that shares no memory with the receiver (for example over a new
// connection); the kit then goes on with the new handle.
type Durable interface {
	Reopen(ctx context.Context) (Resource, error)
}

// Failure is one check the resource did not pass.
type Failure struct {
	// Check is the name of the failed check, as listed in the package
	// documentation; Run uses it as the subtest name.
	Check string
	// Message names the broken property and what was observed.
	Message string
}

// Error returns the check name followed by the message.
func (f Failure) Error() string { return f.Check + ": " + f.Message }

// Run runs every check of the kit against resources built by newResource,
// one subtest per check. newResource is called from the subtest's
// goroutine with the subtest's t, at least once per check, and must return
// a resource with no accepted write: a new row, key or file each time. It
// may call t.Fatal when it cannot build one.
//
// Resources that implement io.Closer, including those returned by Reopen,
// are closed by the kit when the check that opened them is done; register
// other cleanups with t.Cleanup. The Durable check is skipped when the
// resource does not implement [Durable].
func Run(t *testing.T, newResource func(t testing.TB) Resource) {
	t.Helper()
	if newResource == nil {
		t.Fatal("fencingtest: Run needs a resource factory, got nil")
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Helper()
			open := func(context.Context) (Resource, error) { return newResource(t), nil }
			err := runCheck(t.Context(), c, open)
			switch {
			case errors.Is(err, errNotDurable):
				t.Skip("the resource does not implement fencingtest.Durable")
			case err != nil:
				t.Error(err)
			}
		})
	}
}

// Check runs every check of the kit in turn against resources built by
// newResource, and returns the failures in the order of the checks; an
// empty result means the resource passed. newResource must return a
// resource with no accepted write each time it is called; an error from it
// fails the check that asked for the resource. Resources that implement
// io.Closer are closed when the check that opened them is done.
//
// Check stops early, reporting the remaining checks as failed, when ctx is
// done.
func Check(ctx context.Context, newResource func(ctx context.Context) (Resource, error)) []Failure {
	var failures []Failure
	for _, c := range checks {
		var err error
		if newResource == nil {
			err = errors.New("no resource factory (nil)")
		} else {
			err = runCheck(ctx, c, newResource)
		}
		if err != nil && !errors.Is(err, errNotDurable) {
			failures = append(failures, Failure{Check: c.name, Message: err.Error()})
		}
	}
	return failures
}

// runCheck runs one check with its own harness and closes every resource
// the check opened.
func runCheck(ctx context.Context, c check, open func(context.Context) (Resource, error)) (err error) {
	h := &harness{open: open}
	defer func() {
		if cerr := h.closeAll(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not run: %w", err)
	}
	p, err := start(ctx, h, c.property)
	if err != nil {
		return err
	}
	return c.run(p)
}

// errNotDurable ends the Durable check for a resource without Reopen.
var errNotDurable = errors.New("fencingtest: resource is not Durable")

// harness hands out resources to one check and closes them afterwards. It
// is used from the check's goroutine only.
type harness struct {
	open   func(context.Context) (Resource, error)
	opened []Resource
}

// fresh returns a new resource from the factory, guarded against panics.
func (h *harness) fresh(ctx context.Context) (*guarded, error) {
	return h.track(ctx, "the resource factory", h.open)
}

// reopen returns a new handle from d.Reopen, guarded against panics.
func (h *harness) reopen(ctx context.Context, d Durable) (*guarded, error) {
	return h.track(ctx, "Reopen", d.Reopen)
}

// track calls open, named call in errors, and keeps the resource it
// returns for closeAll.
func (h *harness) track(ctx context.Context, call string, open func(context.Context) (Resource, error)) (*guarded, error) {
	var r Resource
	err := catch(call, func() (err error) {
		r, err = open(ctx)
		return err
	})
	if err == nil && r == nil {
		err = fmt.Errorf("%s returned a nil Resource", call)
	}
	if err != nil {
		return nil, err
	}
	h.opened = append(h.opened, r)
	return &guarded{r: r}, nil
}

// closeAll closes the opened resources that are io.Closers, newest first,
// and returns the first error.
func (h *harness) closeAll() error {
	var first error
	for i := len(h.opened) - 1; i >= 0; i-- {
		c, ok := h.opened[i].(io.Closer)
		if !ok {
			continue
		}
		if err := catch("Close", c.Close); err != nil && first == nil {
			first = err
		}
	}
	h.opened = nil
	return first
}

// guarded calls a Resource and turns its panics and errors into errors that
// name the call.
type guarded struct{ r Resource }

func (g *guarded) write(ctx context.Context, token uint64, value string) (accepted bool, err error) {
	call := fmt.Sprintf("Write(token %d, %q)", token, value)
	err = catch(call, func() (err error) {
		accepted, err = g.r.Write(ctx, token, value)
		return err
	})
	return accepted, err
}

func (g *guarded) state(ctx context.Context) (token uint64, value string, err error) {
	err = catch("State()", func() (err error) {
		token, value, err = g.r.State(ctx)
		return err
	})
	return token, value, err
}

// catch runs f and names call in the error it returns or in the panic it
// recovers from.
func catch(call string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s panicked: %v", call, p)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("%s failed: %w", call, err)
	}
	return nil
}
