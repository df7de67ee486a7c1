package memory

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

var (
	_ simba.Backend         = (*Conn)(nil)
	_ simba.ReleaseNotifier = (*Conn)(nil)
	_ simba.OpenedBackend   = (*Conn)(nil)
	_ simba.HolderReader    = (*Conn)(nil)
	_ simba.IdentityOpener  = (*Conn)(nil)
	_ simba.Sweeper         = (*Conn)(nil)
	_ simba.HolderLister    = (*Conn)(nil)
	_ simba.PermitAcquirer  = (*Conn)(nil)
)

// Conn is one node's connection to a [Server]. It implements
// [simba.Backend] and [simba.ReleaseNotifier] by forwarding to the store,
// through the faults set on it. A Conn may be used by many goroutines at
// once, and its faults may be changed while calls are in flight; each call
// reads them when it starts, except the lost reply, read when the store
// has answered.
//
// A call that must wait for its context (stalled connection, lost reply)
// waits until the context is done or the Conn is closed.
type Conn struct {
	s    *Server
	done chan struct{} // closed by Close

	mu      sync.Mutex
	closed  bool
	stalled bool
	failErr error
	drop    bool
	delay   time.Duration
	calls   map[string]int
}

// Stall black-holes the connection, like a partition or a paused network:
// every call starting from now waits until its context is done and returns
// an error wrapping the context's error, without reaching the store.
// Release notifications to this connection are lost. A call that started
// while stalled stays lost even if [Conn.Unstall] comes before its context
// ends.
func (c *Conn) Stall() { c.set(func() { c.stalled = true }) }

// Unstall ends [Conn.Stall]: calls starting from now reach the store.
func (c *Conn) Unstall() { c.set(func() { c.stalled = false }) }

// Fail makes every call starting from now fail at once with an error
// wrapping err, without reaching the store; Fail(nil) ends that. Release
// notifications to a failing connection are lost.
func (c *Conn) Fail(err error) { c.set(func() { c.failErr = err }) }

// DropReplies with on set makes every call reach the store and take effect, then
// wait until its context is done and return an error wrapping the
// context's error, as if the reply were lost; release notifications are
// lost too. DropReplies(false) ends that.
func (c *Conn) DropReplies(on bool) { c.set(func() { c.drop = on }) }

// Delay makes every call starting from now wait d before it reaches the
// store; a call whose context ends during the wait returns an error wrapping
// the context's error and never reaches the store. Delay(0) ends that.
// Release notifications are not delayed.
func (c *Conn) Delay(d time.Duration) { c.set(func() { c.delay = max(d, 0) }) }

// Heal clears every fault of the connection.
func (c *Conn) Heal() {
	c.set(func() { c.stalled, c.failErr, c.drop, c.delay = false, nil, false, 0 })
}

// Close closes the connection, at once: calls waiting on a fault (a stall,
// a lost reply, a delay) return an error wrapping [ErrClosed], every later
// call fails with it, and the release watches made through c are woken.
// The store is untouched: sessions opened through c live on until they
// expire or are closed through another connection. Close is idempotent and
// returns nil.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	c.s.dropWatches(c)
	return nil
}

// Server returns the store c is connected to.
func (c *Conn) Server() *Server { return c.s }

// Calls returns, per operation name, how many calls of this connection
// reached the store (see [Server.Calls]).
func (c *Conn) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

func (c *Conn) set(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// count records a call of op that reached the store.
func (c *Conn) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
}

// isClosed reports whether Close was called.
func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// cutOff reports whether a notification to c is lost.
func (c *Conn) cutOff() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stalled || c.failErr != nil || c.drop
}

// do runs op against the store through the faults of c.
func (c *Conn) do(ctx context.Context, op string, f func() error) error {
	c.mu.Lock()
	closed, stalled, failErr, delay := c.closed, c.stalled, c.failErr, c.delay
	c.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("memory: %s: %w", op, ErrClosed)
	case failErr != nil:
		return fmt.Errorf("memory: %s: connection failing: %w", op, failErr)
	case stalled:
		return c.wait(ctx, op, "connection stalled")
	case delay > 0:
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("memory: %s: delayed: %w", op, ctx.Err())
		case <-c.done:
			t.Stop()
			return fmt.Errorf("memory: %s: delayed: %w", op, ErrClosed)
		case <-t.C:
		}
	}
	err := f()
	c.mu.Lock()
	drop := c.drop
	c.mu.Unlock()
	if drop {
		return c.wait(ctx, op, "reply lost")
	}
	return err
}

// wait blocks until ctx is done or c is closed, and returns op's error,
// which names the fault (what) and wraps ctx's error or ErrClosed.
func (c *Conn) wait(ctx context.Context, op, what string) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("memory: %s: %s: %w", op, what, ctx.Err())
	case <-c.done:
		return fmt.Errorf("memory: %s: %s: %w", op, what, ErrClosed)
	}
}

// forward makes the call f to the store, for op, through the faults of c:
// a failed call, a lost reply included, returns the zero T.
func forward[T any](ctx context.Context, c *Conn, op string, f func() (T, error)) (T, error) {
	var v T
	err := c.do(ctx, op, func() (err error) {
		v, err = f()
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// OpenSession is [Server.OpenSession] through the faults of c.
func (c *Conn) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	return forward(ctx, c, OpOpenSession, func() (simba.SessionGrant, error) { return c.s.openSession(ctx, lease, "", c) })
}

// OpenSessionAs is [Server.OpenSessionAs] through the faults of c.
func (c *Conn) OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error) {
	return forward(ctx, c, OpOpenSession, func() (simba.SessionGrant, error) { return c.s.openSession(ctx, lease, identity, c) })
}

// Holder is [Server.Holder] through the faults of c.
func (c *Conn) Holder(ctx context.Context, name string) (h simba.Holder, ok bool, err error) {
	err = c.do(ctx, OpHolder, func() (err error) {
		h, ok, err = c.s.holder(ctx, name, c)
		return err
	})
	if err != nil {
		return simba.Holder{}, false, err
	}
	return h, ok, nil
}

// ListHolders is [Server.ListHolders] through the faults of c.
func (c *Conn) ListHolders(ctx context.Context, q simba.ListQuery) (simba.HolderPage, error) {
	return forward(ctx, c, OpListHolders, func() (simba.HolderPage, error) { return c.s.listHolders(ctx, q, c) })
}

// Sweep is [Server.Sweep] through the faults of c.
func (c *Conn) Sweep(ctx context.Context, idle time.Duration) (int, error) {
	return forward(ctx, c, OpSweep, func() (int, error) { return c.s.sweep(ctx, idle, c) })
}

// KeepAlive is [Server.KeepAlive] through the faults of c.
func (c *Conn) KeepAlive(ctx context.Context, id simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	return forward(ctx, c, OpKeepAlive, func() (simba.KeepAliveReply, error) { return c.s.keepAlive(ctx, id, req, c) })
}

// Acquire is [Server.Acquire] through the faults of c.
func (c *Conn) Acquire(ctx context.Context, id simba.SessionID, name string) (simba.AcquireResult, error) {
	return forward(ctx, c, OpAcquire, func() (simba.AcquireResult, error) { return c.s.acquire(ctx, id, name, c) })
}

// AcquirePermit is [Server.AcquirePermit] through the faults of c.
func (c *Conn) AcquirePermit(ctx context.Context, id simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	return forward(ctx, c, OpAcquirePermit, func() (simba.AcquireResult, error) { return c.s.acquirePermit(ctx, id, p, c) })
}

// Release is [Server.Release] through the faults of c.
func (c *Conn) Release(ctx context.Context, id simba.SessionID, name string, token uint64) error {
	return c.do(ctx, OpRelease, func() error { return c.s.release(ctx, id, name, token, c) })
}

// JoinGroup is [Server.JoinGroup] through the faults of c.
func (c *Conn) JoinGroup(ctx context.Context, id simba.SessionID, group string) (int, error) {
	return forward(ctx, c, OpJoinGroup, func() (int, error) { return c.s.joinGroup(ctx, id, group, c) })
}

// LeaveGroup is [Server.LeaveGroup] through the faults of c.
func (c *Conn) LeaveGroup(ctx context.Context, id simba.SessionID, group string) error {
	return c.do(ctx, OpLeaveGroup, func() error { return c.s.leaveGroup(ctx, id, group, c) })
}

// CloseSession is [Server.CloseSession] through the faults of c.
func (c *Conn) CloseSession(ctx context.Context, id simba.SessionID) error {
	return c.do(ctx, OpCloseSession, func() error { return c.s.closeSession(ctx, id, c) })
}

// WatchRelease is [Server.WatchRelease] through the faults of c. While c is
// stalled, failing or dropping replies, the release notifications it would
// get are lost: the channel is not closed.
func (c *Conn) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	return forward(ctx, c, OpWatchRelease, func() (<-chan struct{}, error) { return c.s.watch(ctx, name, c) })
}
