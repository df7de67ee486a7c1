package topology

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/simba-go/simba/backend-zk"
	simba "github.com/simba-go/simba/core"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/history"
)

// The kinds of the records of this file, which the checker passes over: a
// failed Acquire, and a session event of the client (Reason names it).
const (
	acquireFailed = "acquire-failed"
	sessionEvent  = "session-event"
)

// recordedEvents are the client events recorded in the history.
var recordedEvents = map[simba.EventKind]bool{
	simba.EventSessionSuspended:      true,
	simba.EventSessionRestored:       true,
	simba.EventSessionDeadlinePassed: true,
	simba.EventSessionExpired:        true,
}

// contention is a few Simba clients, each on a backend of its own opened
// by URL, whose workers contend for a few lock names and record every term
// in one history.
type contention struct {
	path    string
	lease   time.Duration
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	writers []*history.Writer
	faults  *history.Writer

	mu       sync.Mutex
	events   map[string]int // client events by kind, over the run
	errs     map[string]int // failed acquires, by error
	sessions atomic.Int64   // sessions opened
}

// contentionOptions sizes a contention.
type contentionOptions struct {
	nodes, locks, workers int
	lease, hold           time.Duration
	// longLocks more names, long-0 .., are held for up to 2*longHold, so
	// that terms are under way when a fault strikes and show how they end.
	longLocks int
	longHold  time.Duration
}

// contend starts o.nodes clients on url; each runs o.workers workers on
// every lock name lock-0 .. lock-(o.locks-1) and long-0 ..
// long-(o.longLocks-1). Stop them with stop.
func contend(ctx context.Context, t testing.TB, url string, o contentionOptions) *contention {
	t.Helper()
	c := &contention{
		path:   filepath.Join(t.TempDir(), "history.jsonl"),
		lease:  o.lease,
		events: map[string]int{},
		errs:   map[string]int{},
	}
	ctx, c.cancel = context.WithCancel(ctx)
	f, err := history.Create(c.path, "suite")
	if err != nil {
		t.Fatal(err)
	}
	c.faults = f
	ready := make(chan error, o.nodes)
	for i := range o.nodes {
		h, err := history.Create(c.path, fmt.Sprintf("node-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		c.writers = append(c.writers, h)
		c.wg.Go(func() { c.node(ctx, url, h, o, ready) })
	}
	for range o.nodes {
		if err := <-ready; err != nil {
			c.stop(t)
			t.Fatalf("open %s: %v", url, err)
		}
	}
	return c
}

func (c *contention) node(ctx context.Context, url string, h *history.Writer, o contentionOptions, ready chan<- error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	b, err := simba.OpenBackend(octx, url)
	cancel()
	if err != nil {
		ready <- err
		return
	}
	defer b.Close()
	client, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: o.lease}),
		simba.WithEventListener(func(_ context.Context, e simba.Event) {
			c.mu.Lock()
			c.events[e.Kind.String()]++
			c.mu.Unlock()
			if e.Kind == simba.EventSessionOpened {
				c.sessions.Add(1)
				h.Add(history.Record{Kind: history.KindSession, Session: string(e.Session)})
			}
			if recordedEvents[e.Kind] {
				h.Add(history.Record{Kind: sessionEvent, Session: string(e.Session), Reason: e.Kind.String()})
			}
		}))
	if err != nil {
		ready <- err
		return
	}
	ready <- nil
	var wg sync.WaitGroup
	for l := range o.locks + o.longLocks {
		name, hold := fmt.Sprintf("lock-%d", l), o.hold
		if l >= o.locks {
			name, hold = fmt.Sprintf("long-%d", l-o.locks), o.longHold
		}
		for range o.workers {
			wg.Go(func() { c.worker(ctx, client, h, name, hold) })
		}
	}
	wg.Wait()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = client.Close(cctx)
}

// worker acquires the lock, holds it for a random time up to twice hold
// (less when the term ends first), releases it, idles up to 30ms, and
// again. A failed acquire is recorded too (kind acquireFailed).
func (c *contention) worker(ctx context.Context, client *simba.Client, h *history.Writer, name string, hold time.Duration) {
	lock := client.Lock(name)
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 20*c.lease)
		lt, err := lock.Acquire(actx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.mu.Lock()
				c.errs[errClass(err)]++
				c.mu.Unlock()
				h.Add(history.Record{Kind: acquireFailed, Name: name, Err: err.Error()})
				sleepCtx(ctx, 50*time.Millisecond)
			}
			continue
		}
		t := lt.Term
		t0 := history.Mono()
		h.Add(history.Record{Kind: history.KindStart, Name: name, Token: t.Token(), Session: string(t.Session()),
			Deadline: t0 + int64(t.Remaining())})
		timer := time.NewTimer(rand.N(2*hold) + 1)
		select {
		case <-timer.C:
		case <-t.Done():
		case <-ctx.Done():
		}
		timer.Stop()
		reason := "released"
		if r := t.Reason(); r != simba.NotRevoked {
			reason = r.String()
		} else if !t.Valid() {
			reason = "DEADLINE_SEEN"
		}
		h.Add(history.Record{Kind: history.KindEnd, Name: name, Token: t.Token(), Reason: reason})
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.lease)
		_ = lt.Release(rctx)
		cancel()
		sleepCtx(ctx, rand.N(30*time.Millisecond))
	}
}

// errClass shortens an error to its kind, for counting.
func errClass(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// fault records a fault that struck at kill (history clock).
func (c *contention) fault(kind string, member int, kill int64) {
	c.faults.Add(history.Record{T: kill, Kind: history.KindFault, Fault: kind, Node: fmt.Sprintf("zk-%d", member), Phase: "begin"})
}

// stop ends the workers, closes the clients and the history.
func (c *contention) stop(t testing.TB) {
	t.Helper()
	c.cancel()
	c.wg.Wait()
	for _, h := range c.writers {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	}
	if err := c.faults.Close(); err != nil {
		t.Error(err)
	}
}

// records reads the history back.
func (c *contention) records(t testing.TB) []history.Record {
	t.Helper()
	recs, err := history.ReadFile(c.path)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// figures sums up a run: the checker's verdict and, per fault kind, how
// long after each kill each lock-N name (held briefly, so that a new term
// follows soon whenever the service allows one) had its first new term,
// and how the terms of every name ended within window of a kill.
type figures struct {
	res       *check.Result
	failovers map[string][]time.Duration // by fault kind: kill to the first term of a name
	worst     map[string][]time.Duration // by fault kind: kill to the last name's first term
	missing   map[string]int             // names without a new term within window of a kill
	reasons   map[string]map[string]int  // by fault kind ("none" outside windows): end reason -> terms
	events    map[string]map[string]int  // by fault kind, as reasons: session event -> count
	elections map[string][]time.Duration // by fault kind: kill to the ensemble serving again
	terms     int
	timeouts  int // acquires that failed (each waited 20 leases)
}

func summarize(recs []history.Record, lease time.Duration, window time.Duration) *figures {
	fg := &figures{
		res:       check.Check(recs, check.Timing{Lease: lease, Renew: lease / 3, Jitter: lease / 6, Slack: time.Second}),
		failovers: map[string][]time.Duration{},
		worst:     map[string][]time.Duration{},
		missing:   map[string]int{},
		reasons:   map[string]map[string]int{},
		events:    map[string]map[string]int{},
		elections: map[string][]time.Duration{},
	}
	type kill struct {
		t    int64
		kind string
	}
	var kills []kill
	starts := map[string][]int64{}
	for _, r := range recs {
		switch r.Kind {
		case history.KindFault:
			kills = append(kills, kill{r.T, r.Fault})
		case history.KindStart:
			if strings.HasPrefix(r.Name, "lock-") {
				starts[r.Name] = append(starts[r.Name], r.T)
			}
			fg.terms++
		case acquireFailed:
			fg.timeouts++
		}
	}
	slices.SortFunc(kills, func(a, b kill) int { return compareInt64(a.t, b.t) })
	for _, ts := range starts {
		slices.Sort(ts)
	}
	for _, k := range kills {
		var worst time.Duration
		for _, ts := range starts {
			i, _ := slices.BinarySearch(ts, k.t+1)
			if i == len(ts) || ts[i]-k.t > int64(window) {
				fg.missing[k.kind]++
				continue
			}
			d := time.Duration(ts[i] - k.t)
			fg.failovers[k.kind] = append(fg.failovers[k.kind], d)
			worst = max(worst, d)
		}
		fg.worst[k.kind] = append(fg.worst[k.kind], worst)
	}
	for _, r := range recs {
		into := fg.reasons
		switch r.Kind {
		case history.KindEnd:
		case sessionEvent:
			into = fg.events
		default:
			continue
		}
		kind := check.None
		for _, k := range kills {
			if r.T >= k.t && r.T < k.t+int64(window) {
				kind = k.kind
			}
		}
		if into[kind] == nil {
			into[kind] = map[string]int{}
		}
		into[kind][r.Reason]++
	}
	return fg
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// median and most of durations.
func spread(ds []time.Duration) (median, most time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	return check.Percentile(ds, 50), slices.Max(ds)
}

func (fg *figures) String() string {
	var b strings.Builder
	tot := fg.res.Total()
	fmt.Fprintf(&b, "terms %d, overlaps %d, token regressions %d, violations %d, failed acquires %d\n",
		fg.terms, tot.Overlaps, tot.TokenRegressions, len(fg.res.Violations), fg.timeouts)
	for _, kind := range []string{LeaderKill, FollowerKill} {
		emed, emost := spread(fg.elections[kind])
		fmt.Fprintf(&b, "%s: the ensemble served again (a leader, every survivor answering) after median %v, max %v\n",
			kind, emed.Round(time.Millisecond), emost.Round(time.Millisecond))
		med, most := spread(fg.failovers[kind])
		wmed, wmost := spread(fg.worst[kind])
		fmt.Fprintf(&b, "%s: %d kills; first new term of a name after the kill: median %v, max %v (%d name-kills, %d without one); every name: median %v, max %v\n",
			kind, len(fg.worst[kind]), med.Round(time.Millisecond), most.Round(time.Millisecond),
			len(fg.failovers[kind]), fg.missing[kind], wmed.Round(time.Millisecond), wmost.Round(time.Millisecond))
	}
	for _, part := range []struct {
		what   string
		counts map[string]map[string]int
	}{{"terms ended", fg.reasons}, {"session events", fg.events}} {
		kinds := make([]string, 0, len(part.counts))
		for k := range part.counts {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			rs := make([]string, 0, len(part.counts[k]))
			for r, n := range part.counts[k] {
				rs = append(rs, fmt.Sprintf("%s %d", r, n))
			}
			slices.Sort(rs)
			fmt.Fprintf(&b, "%s within the window of %s: %s\n", part.what, k, strings.Join(rs, ", "))
		}
	}
	for _, v := range fg.res.Violations {
		fmt.Fprintf(&b, "violation: %s\n", v)
	}
	return b.String()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
