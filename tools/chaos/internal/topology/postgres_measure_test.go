package topology

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simba "github.com/simba-go/simba/core"
)

// TestMeasurePostgres measures the PostgreSQL pair, asynchronous and
// synchronous, with Simba clients contending on a few locks while the
// replica is promoted again and again: token regressions, failover times,
// how the terms end, and the cost of an acquire+release. It runs only with
// SIMBA_MEASURE_POSTGRES set (the number of promotions per setting, 10 when
// not a number) and prints the figures.
func TestMeasurePostgres(t *testing.T) {
	v := os.Getenv("SIMBA_MEASURE_POSTGRES")
	if v == "" {
		t.Skip("set SIMBA_MEASURE_POSTGRES to measure")
	}
	promotions, err := strconv.Atoi(v)
	if err != nil || promotions < 1 {
		promotions = 10
	}
	ctx := context.Background()
	// SIMBA_MEASURE_POSTGRES_DELAY, a duration, slows the replication
	// link of every pair (PostgresOptions.LinkDelay).
	var delay time.Duration
	if d := os.Getenv("SIMBA_MEASURE_POSTGRES_DELAY"); d != "" {
		if delay, err = time.ParseDuration(d); err != nil {
			t.Fatalf("SIMBA_MEASURE_POSTGRES_DELAY: %v", err)
		}
	}
	pairs := map[bool]*Postgres{}
	for _, sync := range []bool{false, true} {
		p, err := StartPostgresReplica(ctx, t.TempDir(), PostgresOptions{Sync: sync, LinkDelay: delay})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := p.Down(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		pairs[sync] = p
	}
	measureCost(ctx, t, pairs[false], pairs[true])
	for _, sync := range []bool{false, true} {
		measureFailovers(ctx, t, pairs[sync], promotions)
	}
}

// measureCost times acquire+release of a free lock through the backend,
// in interleaved rounds on the two pairs.
func measureCost(ctx context.Context, t *testing.T, pairs ...*Postgres) {
	const rounds, perRound = 10, 100
	type side struct {
		b   *simbapg.Backend
		s   simba.SessionID
		lat []time.Duration
	}
	sides := make([]*side, len(pairs))
	for i, p := range pairs {
		b, err := simbapg.Open(ctx, p.URL(), simbapg.Options{TablePrefix: "simba_cost_", Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		g, err := b.OpenSession(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sides[i] = &side{b: b, s: g.ID}
	}
	for r := range rounds {
		for k := range sides {
			sd := sides[(k+r)%len(sides)] // alternate which goes first
			for range perRound {
				start := time.Now()
				got, err := sd.b.Acquire(ctx, sd.s, "cost")
				if err != nil || !got.Won {
					t.Fatalf("Acquire = %+v, %v", got, err)
				}
				if err := sd.b.Release(ctx, sd.s, "cost", got.Token); err != nil {
					t.Fatal(err)
				}
				sd.lat = append(sd.lat, time.Since(start))
			}
		}
	}
	for i, sd := range sides {
		slices.Sort(sd.lat)
		q := func(f float64) time.Duration { return sd.lat[int(f*float64(len(sd.lat)-1))] }
		t.Logf("%s: acquire+release through the backend: median %v, p90 %v, p99 %v (%d pairs, %d interleaved rounds)",
			pairs[i].Name(), q(0.5).Round(time.Microsecond), q(0.9).Round(time.Microsecond), q(0.99).Round(time.Microsecond), len(sd.lat), rounds)
	}
}

type grant struct {
	name  string
	token uint64
	at    time.Time
}

type ledger struct {
	mu      sync.Mutex
	grants  []grant
	endings map[string]int
}

func (l *ledger) grant(name string, token uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grants = append(l.grants, grant{name, token, time.Now()})
}

func (l *ledger) end(how string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endings[how]++
}

// firstAfter is the time of the first grant after t.
func (l *ledger) firstAfter(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.grants) - 1; i >= 0 && l.grants[i].at.After(t); i-- {
		if i == 0 || !l.grants[i-1].at.After(t) {
			return l.grants[i].at, true
		}
	}
	return time.Time{}, false
}

// measureFailovers runs clients contending on p's locks and promotes the
// replica promotions times.
func measureFailovers(ctx context.Context, t *testing.T, p *Postgres, promotions int) {
	const (
		clients = 5
		lease   = time.Second
		hold    = 20 * time.Millisecond
	)
	names := []string{"m0", "m1", "m2"}
	prefix := fmt.Sprintf("simba_m%d_", time.Now().UnixNano()%1e6)
	l := &ledger{endings: map[string]int{}}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var closers []func()
	for i := range clients {
		b, err := simbapg.Open(ctx, p.URL(), simbapg.Options{TablePrefix: prefix, Migrate: i == 0})
		if err != nil {
			t.Fatal(err)
		}
		c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: lease}),
			simba.WithLogger(slog.New(slog.DiscardHandler)),
			simba.WithEventListener(func(_ context.Context, e simba.Event) {
				switch e.Kind {
				case simba.EventSessionDeadlinePassed, simba.EventSessionExpired:
					l.end("session: " + e.Kind.String())
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, func() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.Close(cctx)
			_ = b.Close()
		})
		wg.Go(func() { contend(runCtx, c, names, hold, l) })
	}
	time.Sleep(3 * time.Second)
	var failovers, promoted []time.Duration
	for i := range promotions {
		var promotedAt time.Time
		killed, err := p.Promote(ctx, func() { promotedAt = time.Now() })
		if err != nil {
			t.Fatalf("promotion %d: %v", i+1, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if first, ok := l.firstAfter(killed); ok {
				failovers = append(failovers, first.Sub(killed))
				promoted = append(promoted, promotedAt.Sub(killed))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("promotion %d: no term won within 30s", i+1)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(3 * time.Second) // steady contention before the next one
	}
	stop()
	wg.Wait()
	for _, c := range closers {
		c()
	}

	// Regressions: a grant whose token is at or below one handed out
	// earlier for the same name.
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.SortStableFunc(l.grants, func(a, b grant) int { return a.at.Compare(b.at) })
	top := map[string]uint64{}
	regressions, deepest := 0, uint64(0)
	for _, g := range l.grants {
		if g.token <= top[g.name] {
			regressions++
			deepest = max(deepest, top[g.name]-g.token)
		}
		top[g.name] = max(top[g.name], g.token)
	}
	var endings []string
	for how, n := range l.endings {
		endings = append(endings, fmt.Sprintf("%s %d", how, n))
	}
	slices.Sort(endings)
	t.Logf("%s: %d promotions, %d clients on %d locks, %v leases: %d terms, %d token regressions (deepest %d below the highest already handed out)",
		p.Name(), promotions, clients, len(names), lease, len(l.grants), regressions, deepest)
	t.Logf("%s: from the SIGKILL to the first new term: median %v, max %v (all: %v)",
		p.Name(), median(failovers), slices.Max(failovers).Round(time.Millisecond), roundAll(failovers))
	t.Logf("%s: from the SIGKILL to the end of the promotion (pg_ctl promote -w): median %v, max %v", p.Name(), median(promoted), slices.Max(promoted).Round(time.Millisecond))
	t.Logf("%s: terms ended: %s", p.Name(), strings.Join(endings, ", "))
}

// contend acquires a random lock, holds it for hold and releases it, until
// ctx ends.
func contend(ctx context.Context, c *simba.Client, names []string, hold time.Duration, l *ledger) {
	for ctx.Err() == nil {
		name := names[rand.IntN(len(names))]
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		lt, err := c.Lock(name).Acquire(actx)
		cancel()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		l.grant(name, lt.Token())
		select {
		case <-time.After(hold):
		case <-lt.Done():
		}
		if r := lt.Reason(); r != simba.NotRevoked {
			l.end(r.String())
			continue
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		err = lt.Release(rctx)
		cancel()
		switch r := lt.Reason(); {
		case err != nil && r != simba.Stopped:
			l.end("release failed, then " + r.String())
		case err != nil:
			l.end("released (call failed)")
		default:
			l.end("released")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

func roundAll(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(time.Millisecond)
	}
	return out
}
