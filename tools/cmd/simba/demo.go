package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/fencing"
	"github.com/simba-go/simba/core/memory"
	"github.com/simba-go/simba/tools/internal/wait"
)

const demoAbout = `
Runs three nodes, later four, in this process on the in-memory backend for
about --duration and tells what happens, line by line. Part 1, leader
election with fencing tokens:

  1. the nodes elect a leader, which writes to a shared resource with the
     fencing token of its term;
  2. the leader pauses: its connection stalls, as a long GC pause or a
     network partition would. No keep-alive gets through, its local deadline
     passes and its term ends (DEADLINE_PASSED) on its own clock;
  3. another node takes over with a higher token;
  4. the paused node wakes up and finishes the write it had started: the
     resource refuses the old token;
  5. the paused node opens a new session and contends again as a candidate;
  6. the leader steps down and another node takes over at once.

Part 2, a partition group: the nodes share the 6 partitions of the group
"demo-partitions" (partition i is the lease "demo-partitions.i"); a line
shows who holds which partitions whenever that changes:

  7. the three nodes settle on 2 partitions each;
  8. a fourth node joins: partitions move until the shares are 2, 2, 1, 1;
  9. a node leaves: its partitions move to the three others.

After each change the demo waits until every partition has exactly one
holder and the shares are within one of each other.

No server is needed and nothing leaves the process. Exit code 0 when the
story ran as told, 1 when a step did not happen, 2 for bad flags.
`

// demoLease is the default lease of the demo: short, so that a failover
// fits in a few seconds.
const demoLease = 2 * time.Second

// demoElection is the lease the demo nodes contend for.
const demoElection = "demo-leader"

// runDemo is "simba demo".
func runDemo(ctx context.Context, a *app, args []string) int {
	f := newFlags("demo", "demo [--duration 30s] [--lease 2s]", demoAbout)
	duration := f.Duration("duration", 30*time.Second, "how long the demo runs, roughly")
	lease := f.Duration("lease", demoLease, "lease of the nodes' sessions")
	if _, err := f.parseArgs(args, 0, ""); err != nil {
		return f.fail(a, err)
	}
	if *lease <= 0 {
		return a.usageError("demo", fmt.Errorf("--lease %v: must be positive", *lease))
	}
	if err := (simba.Config{LeaseDuration: *lease}).Validate(); err != nil {
		return a.usageError("demo", fmt.Errorf("--lease %v: %w", *lease, err))
	}
	if *duration < 5**lease {
		return a.usageError("demo", fmt.Errorf("--duration %v: at least 5 times --lease (%v) needed", *duration, 5**lease))
	}
	d := newDemo(a.stdout, *lease, *duration)
	err := d.run(ctx)
	switch {
	case err == nil:
		return exitOK
	case ctx.Err() != nil:
		return interruptedCode(ctx)
	default:
		a.report("demo", "the story went wrong: %v", err)
		return exitFailure
	}
}

// demo is one run of the story: three nodes on one in-memory store, a
// fenced resource, and a record of what happened that the narrator waits
// on.
type demo struct {
	w        io.Writer
	start    time.Time
	lease    time.Duration
	duration time.Duration
	srv      *memory.Server
	nodes    []*demoNode
	resource fencing.Value[string]

	workCtx  context.Context // ends the leaders' work at shutdown
	stopWork context.CancelFunc
	workers  sync.WaitGroup

	mu       sync.Mutex // guards the record below and the output
	changed  chan struct{}
	closing  bool // no leader work starts any more
	terms    []*demoTerm
	accepted int
	rejected []string // the refused writes, described
	late     *bool    // whether the paused node's late write was accepted, once made
	group    groupRecord
}

// demoTerm is one term won by a node, as the demo saw it.
type demoTerm struct {
	node   *demoNode
	term   *simba.Term
	writes int                // writes the resource accepted in this term
	ended  simba.RevokeReason // NotRevoked until OnRevoked ran
}

// demoNode is one node: a client on its own connection to the store.
type demoNode struct {
	d        *demo
	name     string
	conn     *memory.Conn
	client   *simba.Client
	election *simba.Election       // nil for a node that only runs the group
	elects   bool                  // whether the node contends in the election
	sessions int                   // sessions opened, guarded by d.mu
	freeze   chan chan *simba.Term // the narrator pauses the node's leader work
	wake     chan struct{}         // closed when the paused node resumes
	leave    context.CancelFunc    // ends the node's group, once it runs one
	left     chan struct{}         // closed when the node's group has stopped
	leaving  bool                  // the node is leaving the group, guarded by d.mu
}

func newDemo(w io.Writer, lease, duration time.Duration) *demo {
	d := &demo{w: w, lease: lease, duration: duration, srv: memory.New(), changed: make(chan struct{})}
	d.workCtx, d.stopWork = context.WithCancel(context.Background())
	return d
}

// at returns the instant a fraction of the duration after the start.
func (d *demo) at(fraction float64) time.Time {
	return d.start.Add(time.Duration(float64(d.duration) * fraction))
}

// run tells the story; it returns an error naming the first step that did
// not happen, or the context's error.
func (d *demo) run(ctx context.Context) error {
	renew := d.lease / 3
	fmt.Fprintf(d.w, "simba demo: leader election with fencing tokens, then a partition group;\n")
	fmt.Fprintf(d.w, "3 nodes, later 4, in this process (in-memory backend)\n")
	fmt.Fprintf(d.w, "Lease %v: each node renews its session every %v; a node that cannot renew in time\n", d.lease, renew.Round(time.Millisecond))
	fmt.Fprintf(d.w, "stops leading on its own clock. Each leader writes to a shared resource with its term's token;\n")
	fmt.Fprintf(d.w, "the resource refuses a token older than the newest it has accepted.\n\n")
	fmt.Fprintf(d.w, "%7s  %-6s  %s\n", "time", "node", "what happened")

	d.start = time.Now()
	defer d.shutdown()
	for i := 1; i <= 3; i++ {
		if _, err := d.addNode(fmt.Sprintf("node-%d", i), true); err != nil {
			return err
		}
	}
	patience := 10 * d.lease // how long any step may take before the demo gives up

	// 1. A leader is elected and writes.
	var first *demoTerm
	if err := d.await(ctx, patience, "the first election", func() bool {
		first = d.current()
		return first != nil && first.writes > 0
	}); err != nil {
		return err
	}

	// 2. The leader pauses; its term ends on its own clock.
	paused, err := d.leaderAt(ctx, 0.1)
	if err != nil {
		return err
	}
	d.narrate("%s pauses: its connection stalls, as in a long GC pause or a network partition", paused.node.name)
	paused.node.conn.Stall()
	if err := paused.node.freezeWork(ctx, paused.term, patience); err != nil {
		return err
	}
	oldToken := paused.term.Token()
	if err := d.await(ctx, patience, fmt.Sprintf("the end of %s's term", paused.node.name), func() bool {
		return paused.ended != simba.NotRevoked
	}); err != nil {
		return err
	}
	if paused.ended != simba.DeadlinePassed {
		return fmt.Errorf("%s's term ended with %s, want %s", paused.node.name, paused.ended, simba.DeadlinePassed)
	}

	// 3. Failover to another node, with a higher token.
	var next *demoTerm
	if err := d.await(ctx, patience, "a failover", func() bool {
		next = d.current()
		return next != nil && next.node != paused.node && next.writes > 0
	}); err != nil {
		return err
	}
	if next.term.Token() <= oldToken {
		return fmt.Errorf("failover token %d is not higher than %d", next.term.Token(), oldToken)
	}
	d.narrate("failover: %s leads with token %d, higher than the paused %s's token %d",
		next.node.name, next.term.Token(), paused.node.name, oldToken)

	// 4. The paused node wakes up and finishes its write: refused.
	if err := sleepUntil(ctx, d.at(0.25)); err != nil {
		return err
	}
	d.narrate("%s wakes up: its connection works again and it resumes where it froze", paused.node.name)
	paused.node.conn.Unstall()
	close(paused.node.wake)
	if err := d.await(ctx, patience, "the late write", func() bool { return d.late != nil }); err != nil {
		return err
	}
	if *d.late {
		return fmt.Errorf("the resource accepted %s's write with the stale token %d", paused.node.name, oldToken)
	}

	// 5. It rejoins as a candidate.
	if err := d.await(ctx, patience, fmt.Sprintf("a new session of %s", paused.node.name), func() bool {
		return paused.node.sessions > 1
	}); err != nil {
		return err
	}
	state := paused.node.state()
	if state != simba.StateContending {
		return fmt.Errorf("%s rejoined in state %s, want %s", paused.node.name, state, simba.StateContending)
	}
	d.narrate("%s is back as a candidate: %s keeps leading, and %s waits for the lease to be free",
		paused.node.name, next.node.name, paused.node.name)

	// 6. A planned handover.
	cur, err := d.leaderAt(ctx, 0.38)
	if err != nil {
		return err
	}
	d.narrate("%s steps down, as before a planned restart: it releases the lease and the others are told at once", cur.node.name)
	if err := cur.node.election.StepDown(ctx, 2*d.lease); err != nil {
		return fmt.Errorf("step down: %w", err)
	}
	var after *demoTerm
	if err := d.await(ctx, patience, "a handover", func() bool {
		after = d.current()
		return after != nil && after.node != cur.node
	}); err != nil {
		return err
	}
	if after.term.Token() <= cur.term.Token() {
		return fmt.Errorf("handover token %d is not higher than %d", after.term.Token(), cur.term.Token())
	}
	d.narrate("handover: %s leads with token %d", after.node.name, after.term.Token())

	// 7. to 9. The partition group: three nodes, a fourth joins, one leaves.
	if err := d.tellGroup(ctx, patience); err != nil {
		return err
	}

	if err := sleepUntil(ctx, d.at(1)); err != nil {
		return err
	}
	d.narrate("stopping the nodes")
	d.shutdown()
	d.summary()
	return nil
}

// addNode starts a node: its client, its event printing and, when elects,
// its election.
func (d *demo) addNode(name string, elects bool) (*demoNode, error) {
	n := &demoNode{d: d, name: name, elects: elects, conn: d.srv.Connect(),
		freeze: make(chan chan *simba.Term), wake: make(chan struct{})}
	client, err := simba.New(n.conn,
		simba.WithConfig(simba.Config{LeaseDuration: d.lease}),
		simba.WithLogger(slog.New(slog.DiscardHandler)),
		simba.WithEventListener(n.onEvent))
	if err != nil {
		return nil, err
	}
	n.client = client
	d.mu.Lock()
	d.nodes = append(d.nodes, n)
	d.mu.Unlock()
	if !elects {
		return n, nil
	}
	n.election = client.Election(demoElection)
	return n, n.election.Start(simba.ListenerFuncs{Elected: n.onElected, Revoked: n.onRevoked})
}

// shutdown stops the groups, then the elections, candidates first so that
// none of them takes over from the leader, then closes every client and
// waits for the leaders' work. It may be called twice.
func (d *demo) shutdown() {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	d.stopWork()
	d.stopGroups()
	d.mu.Lock()
	var leader *demoNode
	if cur := d.current(); cur != nil {
		leader = cur.node
	}
	nodes := d.nodes
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*d.lease)
	defer cancel()
	for _, n := range nodes {
		if n != leader && n.election != nil {
			_ = n.election.Stop(ctx)
		}
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { _ = n.client.Close(ctx) })
	}
	wg.Wait()
	d.workers.Wait()
}

// summary prints every term and what the resource did.
func (d *demo) summary() {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, "\nSummary\n  terms, in order:\n")
	growing := true
	for i, t := range d.terms {
		fmt.Fprintf(d.w, "    token %-3d %s, %d writes accepted, ended %s\n", t.term.Token(), t.node.name, t.writes, t.ended)
		growing = growing && (i == 0 || t.term.Token() > d.terms[i-1].term.Token())
	}
	_, highest := d.resource.Load()
	fmt.Fprintf(d.w, "  resource: %d writes accepted, %d refused, highest token %d\n", d.accepted, len(d.rejected), highest)
	for _, r := range d.rejected {
		fmt.Fprintf(d.w, "    refused: %s\n", r)
	}
	if growing {
		fmt.Fprintf(d.w, "  Every term had a higher token than the one before it: that is what let the resource\n")
		fmt.Fprintf(d.w, "  tell the paused node's late write from the new leader's.\n")
	}
	fmt.Fprintf(d.w, "  partition group %q: %d partitions taken or released; settled spreads:\n", demoGroup, d.group.moves)
	for _, s := range d.group.settled {
		fmt.Fprintf(d.w, "    %s\n", s)
	}
}

// sayLocked prints one line of the story about node. Call with d.mu held.
func (d *demo) sayLocked(node, format string, args ...any) {
	elapsed := time.Since(d.start).Seconds()
	fmt.Fprintf(d.w, "%7s  %-6s  %s\n", fmt.Sprintf("+%.2fs", elapsed), node, fmt.Sprintf(format, args...))
}

// say is sayLocked with the lock taken.
func (d *demo) say(node, format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sayLocked(node, format, args...)
}

// narrate prints a line of the narrator.
func (d *demo) narrate(format string, args ...any) { d.say("--", format, args...) }

// noteLocked wakes every await. Call with d.mu held.
func (d *demo) noteLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// await waits until cond, called with d.mu held, is true; it gives up
// after patience with an error naming what.
func (d *demo) await(ctx context.Context, patience time.Duration, what string, cond func() bool) error {
	t := time.NewTimer(patience)
	defer t.Stop()
	for {
		d.mu.Lock()
		ok, changed := cond(), d.changed
		d.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			return fmt.Errorf("%s did not happen within %v", what, patience)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// current returns the last term won if it still lasts. Call with d.mu
// held.
func (d *demo) current() *demoTerm {
	if len(d.terms) == 0 {
		return nil
	}
	t := d.terms[len(d.terms)-1]
	if !t.term.Valid() {
		return nil
	}
	return t
}

// leaderAt waits until a fraction of the duration has passed and returns
// the current term then.
func (d *demo) leaderAt(ctx context.Context, fraction float64) (*demoTerm, error) {
	if err := sleepUntil(ctx, d.at(fraction)); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := d.current(); cur != nil {
		return cur, nil
	}
	return nil, fmt.Errorf("no leader at %.0f%% of the demo", 100*fraction)
}

// termOf returns the record of t. Call with d.mu held.
func (d *demo) termOf(t *simba.Term) *demoTerm {
	for _, x := range d.terms {
		if x.term == t {
			return x
		}
	}
	return nil
}

// write is a leader's write to the resource with its term's token.
func (d *demo) write(n *demoNode, t *simba.Term) bool {
	ok := d.resource.Write(t.Token(), n.name)
	d.mu.Lock()
	defer d.mu.Unlock()
	rec := d.termOf(t)
	if ok {
		d.accepted++
		rec.writes++
		if rec.writes == 1 {
			d.sayLocked(n.name, "writes to the resource with token %d: accepted", t.Token())
		}
	} else {
		_, highest := d.resource.Load()
		d.rejected = append(d.rejected, fmt.Sprintf("%s's write with token %d (the resource had token %d)", n.name, t.Token(), highest))
		d.sayLocked(n.name, "writes to the resource with token %d: REJECTED, stale token (the resource has accepted token %d)", t.Token(), highest)
	}
	d.noteLocked()
	return ok
}

func (n *demoNode) onEvent(_ context.Context, e simba.Event) {
	d := n.d
	d.mu.Lock()
	defer d.mu.Unlock()
	switch e.Kind {
	case simba.EventSessionOpened:
		n.sessions++
		switch {
		case n.sessions == 1 && !n.elects:
			d.sayLocked(n.name, "session opened")
		case n.sessions == 1:
			d.sayLocked(n.name, "session opened; contends for %q", demoElection)
		default:
			d.sayLocked(n.name, "new session opened (a new id: the old session is never revived); contends again")
		}
		d.noteLocked()
	case simba.EventSessionSuspended:
		left := "no term to lose"
		if rec := d.lastTermOf(n); rec != nil && rec.term.Valid() {
			left = fmt.Sprintf("its term stays valid for another %v", rec.term.Remaining().Round(time.Millisecond))
		}
		d.sayLocked(n.name, "keep-alive got no answer: session SUSPENDED, retrying; %s", left)
	case simba.EventSessionRestored:
		d.sayLocked(n.name, "keep-alive answered again: session LIVE")
	case simba.EventSessionDeadlinePassed:
		d.sayLocked(n.name, "local deadline passed with no renewal: the session is over for this node")
	case simba.EventSessionExpired:
		d.sayLocked(n.name, "the backend reports the session expired")
	}
}

// lastTermOf returns the last term n won. Call with d.mu held.
func (d *demo) lastTermOf(n *demoNode) *demoTerm {
	for i := len(d.terms) - 1; i >= 0; i-- {
		if d.terms[i].node == n {
			return d.terms[i]
		}
	}
	return nil
}

func (n *demoNode) onElected(_ context.Context, t *simba.Term) {
	d := n.d
	d.mu.Lock()
	d.terms = append(d.terms, &demoTerm{node: n, term: t})
	d.sayLocked(n.name, "elected leader, token %d", t.Token())
	d.noteLocked()
	if d.closing {
		d.mu.Unlock()
		return
	}
	d.workers.Add(1)
	d.mu.Unlock()
	go n.work(t)
}

var revokeExplanations = map[simba.RevokeReason]string{
	simba.Stopped:        "the node is shutting down",
	simba.SteppedDown:    "it gave the lease up",
	simba.DeadlinePassed: "no keep-alive got through before the local deadline, so it stops leading on its own clock",
	simba.SessionExpired: "the backend expired its session",
	simba.TakenOver:      "another session owns the lease now",
}

func (n *demoNode) onRevoked(_ context.Context, t *simba.Term, reason simba.RevokeReason) {
	d := n.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if rec := d.termOf(t); rec != nil {
		rec.ended = reason
	}
	d.sayLocked(n.name, "term with token %d ended: %s (%s)", t.Token(), reason, revokeExplanations[reason])
	d.noteLocked()
}

// work is the leader's work for term t: a write to the resource now and
// every quarter lease, each after checking that the term is still valid.
// The narrator can freeze it between the check and the write, as a pause
// of the whole process would.
func (n *demoNode) work(t *simba.Term) {
	d := n.d
	defer d.workers.Done()
	tick := time.NewTicker(d.lease / 4)
	defer tick.Stop()
	for {
		if t.EnsureValid(0) != nil {
			return
		}
		select {
		case reply := <-n.freeze:
			n.frozen(t, reply)
			return
		default:
		}
		d.write(n, t)
		select {
		case <-tick.C:
		case reply := <-n.freeze:
			n.frozen(t, reply)
			return
		case <-t.Done():
			return
		case <-d.workCtx.Done():
			return
		}
	}
}

// frozen is the work of term t paused after its validity check: it waits
// for the node to wake up, then makes the write it had begun.
func (n *demoNode) frozen(t *simba.Term, reply chan<- *simba.Term) {
	d := n.d
	reply <- t
	select {
	case <-n.wake:
	case <-d.workCtx.Done():
		return
	}
	d.say(n.name, "finishes the write it began before the pause, with its old token %d", t.Token())
	ok := d.write(n, t)
	d.mu.Lock()
	d.late = &ok
	d.noteLocked()
	d.mu.Unlock()
}

// freezeWork pauses the leader work of term t between its validity check
// and its next write.
func (n *demoNode) freezeWork(ctx context.Context, t *simba.Term, patience time.Duration) error {
	reply := make(chan *simba.Term, 1)
	timer := time.NewTimer(patience)
	defer timer.Stop()
	select {
	case n.freeze <- reply:
	case <-timer.C:
		return fmt.Errorf("the work of %s did not pause within %v", n.name, patience)
	case <-ctx.Done():
		return ctx.Err()
	}
	frozen := <-reply
	if frozen != t {
		return fmt.Errorf("%s paused the work of another term", n.name)
	}
	n.d.say(n.name, "had checked its term and begun a write with token %d: frozen in the middle of it", t.Token())
	return nil
}

// state returns the snapshot state of the node's election.
func (n *demoNode) state() simba.LeaseState {
	for _, l := range n.client.Snapshot().Leases {
		if l.Name == demoElection {
			return l.State
		}
	}
	return simba.StateIdle
}

// sleepUntil waits until t or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error {
	return wait.Sleep(ctx, time.Until(t))
}
