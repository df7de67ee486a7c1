package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The partition group of the demo's second part: partition i is the lease
// "demo-partitions.i".
const (
	demoGroup      = "demo-partitions"
	demoPartitions = 6
)

// groupRecord is what the demo saw of the partition group. Guarded by
// demo.mu.
type groupRecord struct {
	holders    [demoPartitions]*demoNode // who works on each partition; nil when free
	members    []*demoNode               // the nodes running the group, in the order they joined
	moves      int                       // partitions taken or released
	lastChange time.Time
	fault      error    // the first broken rule: two holders at once, a failed Run
	settled    []string // the spreads the group settled on, in order
}

// tellGroup is the second part of the story: the three nodes share the
// partitions, a fourth joins, one of the first three leaves. After each
// change it waits until every partition has exactly one holder and the
// shares are within one of even.
func (d *demo) tellGroup(ctx context.Context, patience time.Duration) error {
	if err := sleepUntil(ctx, d.at(0.45)); err != nil {
		return err
	}
	d.narrate("part 2: the nodes run the group %q of %d partitions; partition i is the lease \"%s.i\"",
		demoGroup, demoPartitions, demoGroup)
	d.narrate("each keep-alive tells a node how many nodes run the group; it aims at an even share of the")
	d.narrate("partitions and hands the extra ones over when that count changes (alone, it takes them all)")
	for _, n := range d.nodes {
		d.joinGroup(n)
	}
	if err := d.awaitSettled(ctx, patience, "the first spread"); err != nil {
		return err
	}

	if err := sleepUntil(ctx, d.at(0.63)); err != nil {
		return err
	}
	d.narrate("node-4 starts and joins the group: with 4 members each aims at 1 or 2 partitions, so some move")
	n4, err := d.addNode("node-4", false)
	if err != nil {
		return err
	}
	d.joinGroup(n4)
	if err := d.awaitSettled(ctx, patience, "the spread over 4 nodes"); err != nil {
		return err
	}

	if err := sleepUntil(ctx, d.at(0.8)); err != nil {
		return err
	}
	leaver := d.pickLeaver()
	d.narrate("%s leaves: it stops its work, hands its partitions over and closes its client", leaver.name)
	if err := d.leaveGroup(ctx, leaver, patience); err != nil {
		return err
	}
	return d.awaitSettled(ctx, patience, fmt.Sprintf("the spread after %s left", leaver.name))
}

// joinGroup makes n run the group until it leaves or the demo stops.
func (d *demo) joinGroup(n *demoNode) {
	ctx, cancel := context.WithCancel(d.workCtx)
	n.leave, n.left = cancel, make(chan struct{})
	d.mu.Lock()
	d.group.members = append(d.group.members, n)
	d.group.lastChange = time.Now()
	d.noteLocked()
	d.mu.Unlock()
	go func() {
		defer close(n.left)
		err := n.client.Group(demoGroup, demoPartitions).Run(ctx, n.partition)
		if err != nil {
			d.faultf("%s could not run the group: %w", n.name, err)
		}
	}()
}

// leaveGroup stops n's group, with the ordered handover of its partitions,
// and closes its client.
func (d *demo) leaveGroup(ctx context.Context, n *demoNode, patience time.Duration) error {
	d.mu.Lock()
	n.leaving = true
	d.mu.Unlock()
	n.leave()
	timer := time.NewTimer(patience)
	defer timer.Stop()
	select {
	case <-n.left:
	case <-timer.C:
		return fmt.Errorf("%s did not leave the group within %v", n.name, patience)
	case <-ctx.Done():
		return ctx.Err()
	}
	cctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	if err := n.client.Close(cctx); err != nil {
		return fmt.Errorf("close %s: %w", n.name, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.group.members = slices.DeleteFunc(d.group.members, func(m *demoNode) bool { return m == n })
	for p, h := range d.group.holders {
		if h == n {
			return fmt.Errorf("%s still held partition %d after it left", n.name, p)
		}
	}
	d.group.lastChange = time.Now()
	d.noteLocked()
	return nil
}

// pickLeaver returns the member of the first three nodes that holds the
// most partitions and does not lead the election, so that the election
// story is left alone.
func (d *demo) pickLeaver() *demoNode {
	d.mu.Lock()
	defer d.mu.Unlock()
	var leader, best *demoNode
	if cur := d.current(); cur != nil {
		leader = cur.node
	}
	for _, n := range d.group.members {
		if n != leader && n.elects && (best == nil || d.heldBy(n) > d.heldBy(best)) {
			best = n
		}
	}
	return best
}

// partition is the work of one partition: it holds it until its term ends.
func (n *demoNode) partition(ctx context.Context, p int, _ *simba.Term) error {
	d := n.d
	d.mu.Lock()
	if h := d.group.holders[p]; h != nil && h != n && d.group.fault == nil {
		d.group.fault = fmt.Errorf("partition %d held by %s and %s at once", p, h.name, n.name)
	}
	d.group.holders[p] = n
	d.groupChangedLocked(n, fmt.Sprintf("takes partition %d", p))
	d.mu.Unlock()

	<-ctx.Done()

	d.mu.Lock()
	if d.group.holders[p] == n {
		d.group.holders[p] = nil
	}
	d.groupChangedLocked(n, fmt.Sprintf("releases partition %d", p))
	d.mu.Unlock()
	return nil
}

// groupChangedLocked records a move and prints the new spread, unless the
// demo is stopping. Call with d.mu held.
func (d *demo) groupChangedLocked(n *demoNode, what string) {
	d.group.moves++
	d.group.lastChange = time.Now()
	if !d.closing {
		d.sayLocked(n.name, "%-21s now: %s", what, d.spreadLocked())
	}
	d.noteLocked()
}

// spreadLocked describes who holds which partitions, as in
// "node-1 [0 1] node-2 [2 3] node-3 [4 5]", followed by the free ones.
// Call with d.mu held.
func (d *demo) spreadLocked() string {
	var b strings.Builder
	members := slices.Clone(d.group.members)
	slices.SortFunc(members, func(a, b *demoNode) int { return strings.Compare(a.name, b.name) })
	list := func(label string, holder *demoNode) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		var parts []string
		for p, h := range d.group.holders {
			if h == holder {
				parts = append(parts, fmt.Sprint(p))
			}
		}
		if holder == nil && parts == nil {
			return
		}
		fmt.Fprintf(&b, "%s [%s]", label, strings.Join(parts, " "))
	}
	for _, n := range members {
		if !n.leaving || d.heldBy(n) > 0 {
			list(n.name, n)
		}
	}
	list("free", nil)
	return strings.TrimSpace(b.String())
}

// heldBy counts the partitions n holds. Call with d.mu held.
func (d *demo) heldBy(n *demoNode) int {
	c := 0
	for _, h := range d.group.holders {
		if h == n {
			c++
		}
	}
	return c
}

// balancedLocked reports whether every partition has a holder among the
// members and the members' shares are within one of each other; shares
// describes them, as in "2/2/1/1". Call with d.mu held.
func (d *demo) balancedLocked() (shares string, ok bool) {
	if len(d.group.members) == 0 {
		return "", false
	}
	lo, hi := demoPartitions, 0
	var counts []string
	for _, n := range d.group.members {
		if n.leaving {
			return "", false
		}
		c := d.heldBy(n)
		lo, hi = min(lo, c), max(hi, c)
		counts = append(counts, fmt.Sprint(c))
	}
	for _, h := range d.group.holders {
		if h == nil || !slices.Contains(d.group.members, h) {
			return "", false
		}
	}
	return strings.Join(counts, "/"), hi-lo <= 1
}

// awaitSettled waits until the group is balanced and no partition has
// moved for a lease, long enough for every node to have seen the member
// count and taken its extra partition; then it prints the spread.
func (d *demo) awaitSettled(ctx context.Context, patience time.Duration, what string) error {
	quiet := d.lease
	give := time.NewTimer(patience)
	defer give.Stop()
	wait := time.NewTimer(quiet)
	defer wait.Stop()
	for {
		d.mu.Lock()
		fault := d.group.fault
		shares, ok := d.balancedLocked()
		left := quiet - time.Since(d.group.lastChange)
		changed := d.changed
		if fault == nil && ok && left <= 0 {
			d.group.settled = append(d.group.settled, d.spreadLocked())
			d.sayLocked("--", "settled: every partition has exactly one holder; shares %s, within one of %d/%d",
				shares, demoPartitions, len(d.group.members))
			d.mu.Unlock()
			return nil
		}
		d.mu.Unlock()
		if fault != nil {
			return fault
		}
		wait.Reset(max(left, time.Millisecond))
		select {
		case <-changed:
		case <-wait.C:
		case <-give.C:
			return fmt.Errorf("%s did not settle within %v (partitions: %s)", what, patience, d.spread())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// spread is spreadLocked with the lock taken.
func (d *demo) spread() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.spreadLocked()
}

// faultf records the first broken rule of the group part.
func (d *demo) faultf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.group.fault == nil && !d.closing {
		d.group.fault = fmt.Errorf(format, args...)
	}
	d.noteLocked()
}

// stopGroups ends every node's group and waits for it.
func (d *demo) stopGroups() {
	d.mu.Lock()
	members := slices.Clone(d.group.members)
	d.mu.Unlock()
	for _, n := range members {
		n.leave()
	}
	for _, n := range members {
		<-n.left
	}
}
