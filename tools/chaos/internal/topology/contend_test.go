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

// contention is a few Simba clients, each on a backend of its own opened
// by URL, whose workers contend for a few lock names and record every term
// in one history.
type contention struct {
	path    string
	lease   time.Duration
	hold    time.Duration
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
}

// contend starts o.nodes clients on url; each runs o.workers workers on
// every lock name lock-0 .. lock-(o.locks-1). Stop them with stop.
func contend(ctx context.Context, t testing.TB, url string, o contentionOptions) *contention {
	t.Helper()
	c := &contention{
		path:   filepath.Join(t.TempDir(), "history.jsonl"),
		lease:  o.lease,
		hold:   o.hold,
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
		}))
	if err != nil {
		ready <- err
		return
	}
	ready <- nil
	var wg sync.WaitGroup
	for l := range o.locks {
		for range o.workers {
			wg.Go(func() { c.worker(ctx, client, h, fmt.Sprintf("lock-%d", l)) })
		}
	}
	wg.Wait()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = client.Close(cctx)
}

// worker acquires the lock, holds it for c.hold (less when the term ends
// first), releases it, idles up to 30ms, and again.
func (c *contention) worker(ctx context.Context, client *simba.Client, h *history.Writer, name string) {
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
				sleepCtx(ctx, 50*time.Millisecond)
			}
			continue
		}
		t := lt.Term
		t0 := history.Mono()
		h.Add(history.Record{Kind: history.KindStart, Name: name, Token: t.Token(), Session: string(t.Session()),
			Deadline: t0 + int64(t.Remaining())})
		timer := time.NewTimer(c.hold)
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
// long after each kill each name had its first new term, and how the
// terms ended within window of a kill.
type figures struct {
	res       *check.Result
	failovers map[string][]time.Duration // by fault kind: kill to the first term of a name
	worst     map[string][]time.Duration // by fault kind: kill to the last name's first term
	missing   map[string]int             // names without a new term within window of a kill
	reasons   map[string]map[string]int  // by fault kind ("none" outside windows): end reason -> terms
	terms     int
}

func summarize(recs []history.Record, lease time.Duration, window time.Duration) *figures {
	fg := &figures{
		res:       check.Check(recs, check.Timing{Lease: lease, Renew: lease / 3, Jitter: lease / 6, Slack: time.Second}),
		failovers: map[string][]time.Duration{},
		worst:     map[string][]time.Duration{},
		missing:   map[string]int{},
		reasons:   map[string]map[string]int{},
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
			starts[r.Name] = append(starts[r.Name], r.T)
			fg.terms++
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
		if r.Kind != history.KindEnd {
			continue
		}
		kind := check.None
		for _, k := range kills {
			if r.T >= k.t && r.T < k.t+int64(window) {
				kind = k.kind
			}
		}
		if fg.reasons[kind] == nil {
			fg.reasons[kind] = map[string]int{}
		}
		fg.reasons[kind][r.Reason]++
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
	fmt.Fprintf(&b, "terms %d, overlaps %d, token regressions %d, violations %d\n",
		fg.terms, tot.Overlaps, tot.TokenRegressions, len(fg.res.Violations))
	for _, kind := range []string{LeaderKill, FollowerKill} {
		med, most := spread(fg.failovers[kind])
		wmed, wmost := spread(fg.worst[kind])
		fmt.Fprintf(&b, "%s: %d kills; first new term of a name after the kill: median %v, max %v (%d name-kills, %d without one); every name: median %v, max %v\n",
			kind, len(fg.worst[kind]), med.Round(time.Millisecond), most.Round(time.Millisecond),
			len(fg.failovers[kind]), fg.missing[kind], wmed.Round(time.Millisecond), wmost.Round(time.Millisecond))
	}
	kinds := make([]string, 0, len(fg.reasons))
	for k := range fg.reasons {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		rs := make([]string, 0, len(fg.reasons[k]))
		for r, n := range fg.reasons[k] {
			rs = append(rs, fmt.Sprintf("%s %d", r, n))
		}
		slices.Sort(rs)
		fmt.Fprintf(&b, "terms ended within the window of %s: %s\n", k, strings.Join(rs, ", "))
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
