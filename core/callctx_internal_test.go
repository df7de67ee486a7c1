package simba

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A call context that nobody asked for Done reports its deadline through
// Err, and Done, asked late, is closed at once.
func TestCallContextUnarmedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent := context.WithValue(context.Background(), ctxKey{}, "v")
		ctx, stop := newCallContext(parent, time.Second)
		defer stop()
		if d, ok := ctx.Deadline(); !ok || !d.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("deadline %v %v, want now+1s", d, ok)
		}
		if ctx.Err() != nil || ctx.Value(ctxKey{}) != "v" {
			t.Fatalf("before the deadline: err %v value %v", ctx.Err(), ctx.Value(ctxKey{}))
		}
		time.Sleep(time.Second)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v at the deadline, want DeadlineExceeded", ctx.Err())
		}
		if !isClosed(ctx.Done()) {
			t.Fatal("Done asked after the deadline is open")
		}
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Fatalf("cause %v", context.Cause(ctx))
		}
	})
}

// Once Err has returned an error, it returns the same one, whatever the
// parent does afterwards (the contract of context.Context).
func TestCallContextErrIsStable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, stop := newCallContext(parent, time.Second)
		defer stop()
		time.Sleep(time.Second)
		first := ctx.Err()
		cancel()
		if !errors.Is(first, context.DeadlineExceeded) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err %v, then %v after the parent's cancel; want DeadlineExceeded both times", first, ctx.Err())
		}

		ctx2, stop2 := newCallContext(context.Background(), time.Hour)
		stop2()
		if err := ctx2.Err(); !errors.Is(err, context.Canceled) || !isClosed(ctx2.Done()) {
			t.Fatalf("after stop: Err %v, Done closed %v", err, isClosed(ctx2.Done()))
		}
	})
}

// Once armed, Done closes at the deadline as with context.WithDeadline.
func TestCallContextArmedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := newCallContext(context.Background(), time.Second)
		defer stop()
		done := ctx.Done()
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if isClosed(done) || ctx.Err() != nil {
			t.Fatal("ended before its deadline")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !isClosed(done) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("at the deadline: closed %v err %v", isClosed(done), ctx.Err())
		}
	})
}

// stop ends the context before or after it is armed.
func TestCallContextStop(t *testing.T) {
	for _, armFirst := range []bool{false, true} {
		ctx, stop := newCallContext(context.Background(), time.Hour)
		if armFirst {
			ctx.Done()
		}
		stop()
		if !errors.Is(ctx.Err(), context.Canceled) || !isClosed(ctx.Done()) {
			t.Fatalf("armed first %v: after stop err %v closed %v", armFirst, ctx.Err(), isClosed(ctx.Done()))
		}
		stop() // idempotent
	}
}

// The parent's end and an earlier parent deadline reach the call context,
// armed or not.
func TestCallContextFollowsItsParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		unarmed, stop1 := newCallContext(parent, time.Hour)
		defer stop1()
		armed, stop2 := newCallContext(parent, time.Hour)
		defer stop2()
		done := armed.Done()
		cancel()
		synctest.Wait()
		if !errors.Is(unarmed.Err(), context.Canceled) || !isClosed(done) || !errors.Is(armed.Err(), context.Canceled) {
			t.Fatalf("after the parent's cancel: unarmed %v, armed %v closed %v", unarmed.Err(), armed.Err(), isClosed(done))
		}

		short, cancelShort := context.WithTimeout(context.Background(), time.Second)
		defer cancelShort()
		ctx, stop := newCallContext(short, time.Hour)
		defer stop()
		if d, _ := ctx.Deadline(); !d.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("deadline %v, want the parent's", d)
		}
		time.Sleep(time.Second)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v after the parent's deadline", ctx.Err())
		}
	})
}

// Contexts derived from a call context end with it; they hang on the armed
// context, so goleak sees no goroutine of their own left behind.
func TestCallContextDerived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := newCallContext(context.Background(), time.Second)
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		fired := make(chan struct{})
		context.AfterFunc(ctx, func() { close(fired) })
		time.Sleep(time.Second)
		synctest.Wait()
		if !isClosed(child.Done()) || !isClosed(fired) {
			t.Fatalf("at the deadline: child closed %v, AfterFunc ran %v", isClosed(child.Done()), isClosed(fired))
		}
		stop()

		ctx, stop = newCallContext(context.Background(), time.Hour)
		child, cancel2 := context.WithCancel(ctx)
		defer cancel2()
		stop()
		synctest.Wait()
		if !isClosed(child.Done()) {
			t.Fatal("a child outlived stop")
		}
	})
}

// newCallContext is withCallDeadline with its stop as a separate function.
func newCallContext(parent context.Context, d time.Duration) (context.Context, func()) {
	c := withCallDeadline(parent, d)
	return c, c.stop
}
