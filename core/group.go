package simba

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// MaxPartitions is the largest number of partitions of a group.
const MaxPartitions = 4096

// PartitionFunc is the work of one partition of a group: it runs once per
// term of the partition's lease, with a ctx cancelled when the term ends.
type PartitionFunc func(ctx context.Context, partition int, t *Term) error

// Group spreads n partitions over the live nodes that run it: partition i
// is the lease "name.i", each held by at most one node (R-GRP-1), and the
// spread settles within one of an even share as nodes join and leave
// (R-GRP-2). See docs/adr/0002-group-rebalancing.md for the algorithm.
type Group struct {
	c    *Client
	name string
	n    int
}

// Group returns the group name of n partitions. Name and n are checked by
// Run.
func (c *Client) Group(name string, n int) *Group { return &Group{c: c, name: name, n: n} }

// groupState is a running group on this client. Guarded by the client's
// lock.
type groupState struct {
	name     string
	n        int
	members  int       // live members as last reported; 0 until joined
	extrasAt time.Time // no contention above the even floor before this
	parts    []*entry
	timer    *time.Timer
}

// floor and ceil of the even share.
func (g *groupState) floor() int { return g.n / g.members }
func (g *groupState) ceil() int  { return (g.n + g.members - 1) / g.members }

func (g *groupState) held() int {
	n := 0
	for _, e := range g.parts {
		if e.term != nil {
			n++
		}
	}
	return n
}

// mayTake reports whether the node may contend for one more partition.
func (g *groupState) mayTake() bool {
	if g.members == 0 {
		return false
	}
	h := g.held()
	return h < g.floor() || h < g.ceil() && !time.Now().Before(g.extrasAt)
}

// Run joins the group and runs fn for every partition this node wins, with
// a ctx that ends with the partition's term. It blocks until one of these,
// and always stops every partition with the ordered handover and leaves
// the group before it returns:
//
//   - ctx is done: it returns nil;
//   - a partition's fn fails (returns an error or panics) while its term
//     lasts: it returns that *WorkError. With StepDownOnError, the node
//     steps down from that partition for the cooldown instead, and the
//     call goes on;
//   - the client is closed: it returns an error matching ErrClosed.
//
// A partition's fn that returns nil while its term lasts gives the
// partition up for one renew interval, so that the group rebalances it;
// fn runs again on the partition's next term, here or on another node.
// It fails on an invalid name, n outside [1, MaxPartitions], partition
// names longer than the name limit, a nil fn, a group already running on
// this client, and a closed client. A Run of a group whose previous Run
// is still returning fails with ErrAlreadyStarted until that Run has
// stopped every partition; started after that, while the previous Run
// still waits for partition work to exit, it runs as usual: the previous
// Run leaves its partitions and the group's membership to it (the new
// terms still wait for the old handovers, R-HO-1).
func (g *Group) Run(ctx context.Context, fn PartitionFunc, opts ...WorkOption) error {
	if ctx == nil || fn == nil {
		return fmt.Errorf("%w: nil context or partition function", ErrInvalidArgument)
	}
	if g.n < 1 || g.n > MaxPartitions {
		return fmt.Errorf("%w: group %s: %d partitions, want 1 to %d", ErrInvalidArgument, g.name, g.n, MaxPartitions)
	}
	if err := ValidateName(g.name); err != nil {
		return err
	}
	if err := ValidateName(partitionName(g.name, g.n-1)); err != nil {
		return fmt.Errorf("group %s: partition names too long: %w", g.name, err)
	}
	o := workOpts(opts)
	finished := make(chan error, 1)
	c := g.c
	c.lock()
	if c.closed {
		c.unlock()
		return ErrClosed
	}
	if c.groups[g.name] != nil {
		c.unlock()
		return fmt.Errorf("%w: group %s", ErrAlreadyStarted, g.name)
	}
	gs := &groupState{name: g.name, n: g.n}
	runners := make([]*workRunner, 0, g.n)
	for i := range g.n {
		e, err := c.entryFor(partitionName(g.name, i), kindElection)
		if err == nil && e.run != nil {
			err = fmt.Errorf("%w: %s", ErrAlreadyStarted, e.name)
		}
		if err != nil {
			for _, p := range gs.parts {
				p.endRun()
				p.group = nil
				p.forget()
			}
			c.unlock()
			return err
		}
		part := i
		work := func(ctx context.Context, t *Term) error { return fn(ctx, part, t) }
		r := newWorkRunner(c.Election(e.name), work, o, finished)
		runners = append(runners, r)
		e.run = newElectionRun(c, r)
		e.group = gs
		e.cooldown = time.Time{}
		gs.parts = append(gs.parts, e)
	}
	c.groups[g.name] = gs
	if c.sess != nil {
		c.join(c.sess, gs)
	}
	c.unlock()

	var result error
	select {
	case <-ctx.Done():
	case result = <-finished:
	case <-c.done:
		result = fmt.Errorf("simba: group %s: %w", g.name, ErrClosed)
	}

	c.lock()
	if gs.timer != nil {
		gs.timer.Stop()
	}
	delete(c.groups, g.name)
	sess := c.sess
	c.unlock()
	done := make(chan struct{}, len(gs.parts))
	for _, e := range gs.parts {
		go func() {
			_ = c.Election(e.name).Stop(context.WithoutCancel(ctx))
			done <- struct{}{}
		}()
	}
	for range gs.parts {
		<-done
	}
	for _, r := range runners {
		r.awaitWork() // after Close, Stop does not wait for the work: wait here
	}
	c.lock()
	for _, e := range gs.parts {
		// A new Run of the group may have started since the Stops above
		// ended the partitions' runs: its partitions are its own.
		if e.group == gs {
			e.group = nil
			e.forget()
		}
	}
	if sess != nil && !sess.ended && !c.closed && c.groups[g.name] == nil {
		c.leave(sess, g.name)
	}
	c.unlock()
	return result
}

func partitionName(group string, i int) string { return group + "." + strconv.Itoa(i) }

// join makes the session a member of the group in the background. Call
// with the lock held.
func (c *Client) join(s *session, gs *groupState) {
	c.goBackground(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, s.renewPeriod())
		members, err := c.b.JoinGroup(ctx, s.id, gs.name)
		cancel()
		c.lock()
		defer c.unlock()
		if err != nil {
			c.emit(Event{Kind: EventBackendError, Name: gs.name, Err: err})
			return // the next keep-alive finds the group missing and joins again
		}
		if c.groups[gs.name] == gs && c.sess == s {
			c.setMembers(gs, members)
		}
	})
}

// leave ends the membership of s in group in the background. A leave that
// fails is sent again after the next keep-alive that still counts s a
// member (groupCounts). Call with the lock held.
func (c *Client) leave(s *session, group string) {
	c.goBackground(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, s.renewPeriod())
		defer cancel()
		_ = c.b.LeaveGroup(ctx, s.id, group)
	})
}

// groupCounts applies the member counts of a keep-alive reply of s: it
// joins the groups the client runs that the reply misses, and leaves the
// ones it lists that the client no longer runs (a leave that failed, a
// join that landed after its group stopped). Call with the lock held.
func (c *Client) groupCounts(s *session, counts map[string]int) {
	for name, gs := range c.groups {
		m, ok := counts[name]
		if !ok {
			c.join(s, gs)
			continue
		}
		c.setMembers(gs, m)
	}
	for name := range counts {
		if _, runs := c.groups[name]; !runs && !c.closed {
			c.leave(s, name)
		}
	}
}

// setMembers applies a member count. When it changes, the node steps down
// to the even floor and delays contention for extra partitions by one renew
// interval, so that nodes below the floor take the freed partitions first.
func (c *Client) setMembers(gs *groupState, members int) {
	if members < 1 || members == gs.members {
		return
	}
	gs.members = members
	gs.extrasAt = time.Now().Add(c.cfg.RenewInterval)
	c.shed(gs, gs.floor())
	for _, e := range gs.parts {
		e.contend()
	}
	if gs.timer != nil {
		gs.timer.Stop()
	}
	gs.timer = time.AfterFunc(c.cfg.RenewInterval, func() {
		c.lock()
		defer c.unlock()
		if c.groups[gs.name] == gs {
			for _, e := range gs.parts {
				e.contend()
			}
		}
	})
}

// shed steps down from held partitions above keep, with the ordered
// handover, starting with the highest partition.
func (c *Client) shed(gs *groupState, keep int) {
	extra := gs.held() - keep
	for i := len(gs.parts) - 1; i >= 0 && extra > 0; i-- {
		e := gs.parts[i]
		if e.term == nil {
			continue
		}
		extra--
		el := c.Election(e.name)
		c.goBackground(func(ctx context.Context) { _ = el.StepDown(ctx, c.cfg.RenewInterval) })
	}
}
