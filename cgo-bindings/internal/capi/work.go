package capi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	simba "github.com/simba-go/simba/core"
)

// ReasonName returns the name of a revoke reason as the engine prints it
// (STOPPED), or "REASON_UNKNOWN" for a value simba.h does not define.
func ReasonName(r int32) string {
	if r < int32(simba.NotRevoked) || r > int32(simba.TakenOver) {
		return "REASON_UNKNOWN"
	}
	return simba.RevokeReason(r).String()
}

// Holder asks the backend who holds the lease name now (any node, this
// one included); ok is false when nobody does. The call is bounded by
// timeoutMS (NoTimeout: the engine's own bound, one renew interval) and by
// the cancel handle, if not 0.
func Holder(client uint64, name string, timeoutMS int64, cancel uint64) (h simba.Holder, ok bool, err error) {
	cr, err := clientOf(client)
	if err != nil {
		return h, false, err
	}
	if err := simba.ValidateName(name); err != nil {
		return h, false, err
	}
	ctx, stop, err := waitContext(context.Background(), timeoutMS, cancel)
	if err != nil {
		return h, false, err
	}
	defer stop()
	if cancelled(cancel) {
		// A backend that answers at once need not look at ctx: a cancelled
		// handle fails the call all the same.
		return h, false, fmt.Errorf("holder of %s: %w", name, context.Canceled)
	}
	return cr.c.Holder(ctx, name)
}

// cancelled reports whether the cancel handle h (0: none) is cancelled.
// The ctx of waitContext learns of it a moment later, on a goroutine.
func cancelled(h uint64) bool {
	if h == 0 {
		return false
	}
	cr, err := cancelOf(h)
	return err == nil && cr.ctx.Err() != nil
}

// WaitEnd waits at most timeoutMS (NoTimeout: no bound) for the term to
// end. It returns nil once the term ended (at once for an ended one), and
// a Timeout error while it lasts.
func WaitEnd(term uint64, timeoutMS int64) error {
	tr, err := termOf(term)
	if err != nil {
		return err
	}
	ctx, stop, err := waitContext(context.Background(), timeoutMS, 0)
	if err != nil {
		return err
	}
	defer stop()
	select {
	case <-tr.term.Done():
		return nil
	default:
	}
	select {
	case <-tr.term.Done():
		return nil
	case <-ctx.Done():
		select {
		case <-tr.term.Done():
			return nil
		default:
		}
		return fmt.Errorf("term %d lasts after %dms: %w", tr.term.Token(), timeoutMS, ctx.Err())
	}
}

// Work is leader work from C: it runs once per term on a thread of the
// library with the handle of the term, valid until it returns, and cb to
// pass back to the library, so that a stop or close from the work does
// not wait for it. partition is -1 for RunWhileLeader. It returns OK when
// its work is done, or the status of its failure.
type Work func(partition int, term, token, cb uint64) Status

// workFailed is the error of a work that returned st: it matches the
// sentinel of st, so that the call that ran the work returns st itself.
func workFailed(st Status) error {
	for _, s := range sentinels {
		if s.status == st {
			return fmt.Errorf("the work returned %s: %w", st, s.err)
		}
	}
	return fmt.Errorf("the work returned %s", st) // SIMBA_ERR_BACKEND, another error
}

// workCalls runs the calls of one RunWhileLeader or GroupRun to a C work
// and waits for the last of them to return.
type workCalls struct {
	client *clientRef
	work   Work
	wg     sync.WaitGroup
}

// run calls the work for the term t of partition (-1: none) with a handle
// of its own, freed when the work returned.
func (w *workCalls) run(ctx context.Context, partition int, t *simba.Term) error {
	w.wg.Add(1)
	defer w.wg.Done()
	// Not owned by the client: the handle stays valid until the work
	// returned, also through a close of the client, which ends the term.
	th := handles.add(&termRef{client: w.client, term: t})
	defer handles.remove(th)
	cb := enterCallback(ctx)
	defer leaveCallback(cb)
	if st := w.work(partition, th, t.Token(), cb); st != OK {
		return workFailed(st)
	}
	return nil
}

// RunWhileLeader contends for the leadership of name and runs work once
// per term won, until timeoutMS passes or the cancel handle is cancelled
// (then it returns nil), the work returns while its term lasts (nil when
// it returned OK, else an error of its status), or the client is closed
// (Closed). Work interrupted because its term ended runs again on the
// next term (R-WORK-1); the election always stops with the ordered
// handover before the call returns (R-HO-1), and the call returns once
// the last call of work returned.
func RunWhileLeader(client uint64, name string, timeoutMS int64, cancel uint64, work Work) error {
	cr, err := workClient(client, work)
	if err != nil {
		return err
	}
	return runWork(cr, name, timeoutMS, cancel, work, func(ctx context.Context, w *workCalls) error {
		return cr.c.Election(name).RunWhileLeader(ctx, func(ctx context.Context, t *simba.Term) error {
			return w.run(ctx, -1, t)
		})
	})
}

// GroupRun joins the group name of n partitions and runs work for every
// partition this node wins, with the partition's number, until timeoutMS
// passes or the cancel handle is cancelled (nil), a partition's work
// fails while its term lasts (an error of its status), or the client is
// closed (Closed). A work that returns OK gives its partition up for one
// renew interval, so that the group rebalances (R-GRP-1, R-GRP-2). Every
// partition stops with the ordered handover before the call returns, once
// the last call of work returned.
func GroupRun(client uint64, name string, n int64, timeoutMS int64, cancel uint64, work Work) error {
	cr, err := workClient(client, work)
	if err != nil {
		return err
	}
	if n < 1 || n > simba.MaxPartitions {
		return fmt.Errorf("%w: group %s: %d partitions, want 1 to %d", ErrInvalidArgument, name, n, simba.MaxPartitions)
	}
	return runWork(cr, name, timeoutMS, cancel, work, func(ctx context.Context, w *workCalls) error {
		return cr.c.Group(name, int(n)).Run(ctx, w.run)
	})
}

// workClient returns the client of a RunWhileLeader or GroupRun, and
// refuses a nil work.
func workClient(client uint64, work Work) (*clientRef, error) {
	cr, err := clientOf(client)
	if err != nil {
		return nil, err
	}
	if work == nil {
		return nil, fmt.Errorf("%w: NULL work function", ErrInvalidArgument)
	}
	return cr, nil
}

// runWork checks name and calls run with the ctx of timeoutMS and cancel
// and the workCalls of work, which run passes its terms to; it returns
// once the last call of work returned.
func runWork(cr *clientRef, name string, timeoutMS int64, cancel uint64, work Work, run func(context.Context, *workCalls) error) error {
	if err := simba.ValidateName(name); err != nil {
		return err
	}
	ctx, stop, err := waitContext(context.Background(), timeoutMS, cancel)
	if err != nil {
		return err
	}
	defer stop()
	w := &workCalls{client: cr, work: work}
	err = run(ctx, w)
	w.wg.Wait()
	return unwrapWork(err)
}

// unwrapWork keeps the message of a *WorkError and the status of the
// work's own error.
func unwrapWork(err error) error {
	var we *simba.WorkError
	if errors.As(err, &we) {
		return fmt.Errorf("work of %s under token %d failed: %w", we.Name, we.Token, we.Err)
	}
	return err
}
