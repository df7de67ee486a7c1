package topology

import (
	"context"
	"database/sql"
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

	_ "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simba "github.com/simba-go/simba/core"
)

// mdbTerm is one term a contending client won.
type mdbTerm struct {
	name       string
	token      uint64
	client     int
	begin, end time.Time
	reason     simba.RevokeReason
}

// mdbContention runs clients that mdbContend for names on a topology's URL and
// records every term.
type mdbContention struct {
	mu    sync.Mutex
	terms []mdbTerm
	stop  context.CancelFunc
	wg    sync.WaitGroup
	close []func()
}

func mdbContend(t *testing.T, url string, clients int, names []string, lease time.Duration) *mdbContention {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	c := &mdbContention{stop: stop}
	quiet := slog.New(slog.DiscardHandler)
	for i := range clients {
		octx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := simbamysql.Open(octx, url, simbamysql.Options{TablePrefix: "measure_", Migrate: true})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: lease}), simba.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		c.close = append(c.close, func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = cl.Close(cctx)
			cancel()
			_ = b.Close()
		})
		for _, name := range names {
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				c.work(ctx, cl.Lock(name), i)
			}()
		}
	}
	return c
}

// work takes the lock, holds it 20-80ms, or one time in ten 0.5-1.5s
// (or until the term ends), gives it back, and again, until ctx ends.
func (c *mdbContention) work(ctx context.Context, l *simba.Lock, client int) {
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		lt, err := l.Acquire(actx)
		cancel()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		rec := mdbTerm{name: l.Name(), token: lt.Token(), client: client, begin: time.Now()}
		hold := time.Duration(20+rand.IntN(60)) * time.Millisecond
		if rand.IntN(10) == 0 {
			hold = time.Duration(500+rand.IntN(1000)) * time.Millisecond
		}
		select {
		case <-time.After(hold):
		case <-lt.Done():
		case <-ctx.Done():
		}
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = lt.Release(rctx)
		cancel()
		rec.end, rec.reason = time.Now(), lt.Reason()
		c.mu.Lock()
		c.terms = append(c.terms, rec)
		c.mu.Unlock()
	}
}

func (c *mdbContention) finish() []mdbTerm {
	c.stop()
	c.wg.Wait()
	for _, f := range c.close {
		f()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.terms)
}

// mdbReport is what the measurements of one setting found.
type mdbReport struct {
	setting      string
	terms        int
	regressions  int
	maxBack      uint64
	failover     []time.Duration // kill to the first term begun after it
	allNames     []time.Duration // kill to a new term of every name
	promotion    []time.Duration // kill to the replica writable
	atKill       map[simba.RevokeReason]int
	reasons      map[simba.RevokeReason]int
	regressedPer []int // regressions after each promotion
	// overtaken counts the reasons of the earlier terms whose token a
	// regression handed out again (or went below).
	overtaken map[simba.RevokeReason]int
}

func mdbAnalyse(setting string, terms []mdbTerm, promotions []time.Duration, killAt []time.Time, names []string) mdbReport {
	r := mdbReport{setting: setting, terms: len(terms), promotion: promotions,
		atKill: map[simba.RevokeReason]int{}, reasons: map[simba.RevokeReason]int{}, overtaken: map[simba.RevokeReason]int{},
		regressedPer: make([]int, len(killAt))}
	slices.SortFunc(terms, func(a, b mdbTerm) int { return a.begin.Compare(b.begin) })
	high := map[string]uint64{}
	for i, tm := range terms {
		r.reasons[tm.reason]++
		if h, ok := high[tm.name]; ok && tm.token <= h {
			r.regressions++
			for _, e := range terms[:i] {
				if e.name == tm.name && e.token >= tm.token {
					r.overtaken[e.reason]++
				}
			}
			r.maxBack = max(r.maxBack, h-tm.token)
			for i := len(killAt) - 1; i >= 0; i-- {
				if tm.begin.After(killAt[i]) {
					r.regressedPer[i]++
					break
				}
			}
		}
		high[tm.name] = max(high[tm.name], tm.token)
	}
	for _, k := range killAt {
		first := time.Time{}
		seen := map[string]time.Time{}
		for _, tm := range terms {
			if tm.begin.Before(k) {
				if tm.end.After(k) {
					r.atKill[tm.reason]++
				}
				continue
			}
			if first.IsZero() {
				first = tm.begin
			}
			if _, ok := seen[tm.name]; !ok {
				seen[tm.name] = tm.begin
			}
		}
		if !first.IsZero() {
			r.failover = append(r.failover, first.Sub(k))
		}
		last := time.Time{}
		for _, n := range names {
			if b, ok := seen[n]; ok && b.After(last) {
				last = b
			}
		}
		if len(seen) == len(names) {
			r.allNames = append(r.allNames, last.Sub(k))
		}
	}
	return r
}

func mdbMedianMax(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %v, max %v (n=%d)", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

func (r mdbReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d terms, %d token regressions (at most %d back; per promotion %v)\n", r.setting, r.terms, r.regressions, r.maxBack, r.regressedPer)
	fmt.Fprintf(&b, "  kill to replica writable: %s\n", mdbMedianMax(r.promotion))
	fmt.Fprintf(&b, "  kill to first new term:   %s\n", mdbMedianMax(r.failover))
	fmt.Fprintf(&b, "  kill to every name again: %s\n", mdbMedianMax(r.allNames))
	fmt.Fprintf(&b, "  terms valid at a kill ended by: %v\n", mdbReasonCounts(r.atKill))
	fmt.Fprintf(&b, "  every term ended by: %v\n", mdbReasonCounts(r.reasons))
	fmt.Fprintf(&b, "  terms whose token went again ended by: %v", mdbReasonCounts(r.overtaken))
	return b.String()
}

func mdbReasonCounts(m map[simba.RevokeReason]int) string {
	var parts []string
	for r := simba.NotRevoked; r <= simba.TakenOver; r++ {
		if m[r] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, m[r]))
		}
	}
	return strings.Join(parts, ", ")
}

// mdbCostRound times n acquire+release pairs of one client on url and
// returns each pair's latency.
func mdbCostRound(t *testing.T, cl *simba.Client, name string, n int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, 0, n)
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		lt, err := cl.Lock(name).Acquire(ctx)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		err = lt.Release(ctx)
		out = append(out, time.Since(start))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// mdbSemiSyncStatus reads the semi-synchronous counters of the primary at
// addr, as root.
func mdbSemiSyncStatus(t *testing.T, addr string) string {
	t.Helper()
	db, err := sql.Open("mysql", "root@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), "SHOW GLOBAL STATUS WHERE Variable_name IN "+
		"('Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_clients', 'Rpl_semi_sync_master_yes_tx', "+
		"'Rpl_semi_sync_master_no_tx', 'Rpl_semi_sync_master_tx_avg_wait_time')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, strings.TrimPrefix(k, "Rpl_semi_sync_master_")+"="+v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(parts, " ")
}

// TestMeasureMariaDBPromotions measures, on an asynchronous and a
// semi-synchronous primary and replica, the cost of an acquire+release
// (rounds of each interleaved; SIMBA_MEASURE_MARIADB_COST=0 skips it),
// then, under mdbContention (4 clients, 3 names, 1s leases),
// SIMBA_MEASURE_MARIADB promotions of each (or switchovers, with
// SIMBA_MEASURE_MARIADB_FAULT=failover), on a replica link delayed by
// each of SIMBA_MEASURE_MARIADB_DELAYS (default 0s,5ms): token
// regressions, failover time and the reasons terms end with. Run with
// SIMBA_MEASURE_MARIADB=10 go test -run TestMeasureMariaDBPromotions -v -timeout 60m.
func TestMeasureMariaDBPromotions(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SIMBA_MEASURE_MARIADB"))
	if n <= 0 {
		t.Skip("set SIMBA_MEASURE_MARIADB to the number of promotions per setting")
	}
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the servers and proxies are down
	fault := Promote
	if f := os.Getenv("SIMBA_MEASURE_MARIADB_FAULT"); f != "" {
		fault = f
	}
	delays := []time.Duration{0, 5 * time.Millisecond}
	if d := os.Getenv("SIMBA_MEASURE_MARIADB_DELAYS"); d != "" {
		delays = nil
		for _, f := range strings.Split(d, ",") {
			v, err := time.ParseDuration(f)
			if err != nil {
				t.Fatal(err)
			}
			delays = append(delays, v)
		}
	}
	for _, delay := range delays {
		async := mdbStart(t, MariaDBOptions{LinkDelay: delay})
		semi := mdbStart(t, MariaDBOptions{SemiSync: true, LinkDelay: delay})
		if os.Getenv("SIMBA_MEASURE_MARIADB_COST") != "0" {
			mdbMeasureCost(t, []*MariaDB{async, semi})
		}
		for _, m := range []*MariaDB{async, semi} {
			mdbMeasureFaults(t, m, fault, n)
		}
		for _, m := range []*MariaDB{async, semi} {
			if err := m.Down(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
}

// mdbMeasureCost times acquire+release pairs of one client per topology, in
// rounds that alternate between the topologies.
func mdbMeasureCost(t *testing.T, tops []*MariaDB) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	costs := make([][]time.Duration, len(tops))
	var clients []*simba.Client
	var backends []*simbamysql.Backend
	for _, m := range tops {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := simbamysql.Open(ctx, m.URL(), simbamysql.Options{TablePrefix: "cost_", Migrate: true})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: time.Second}), simba.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		backends, clients = append(backends, b), append(clients, cl)
		mdbCostRound(t, cl, "cost", 20) // warm up: first insert, prepared statements
	}
	for range 6 {
		for i := range tops {
			costs[i] = append(costs[i], mdbCostRound(t, clients[i], "cost", 50)...)
		}
	}
	for i, cl := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = cl.Close(ctx)
		cancel()
		_ = backends[i].Close()
	}
	for i, m := range tops {
		s := slices.Clone(costs[i])
		slices.Sort(s)
		extra := ""
		if m.semiSync {
			extra = "; " + mdbSemiSyncStatus(t, m.Primary())
		}
		t.Logf("%s: acquire+release median %v, p90 %v, over %d pairs%s", m.Name(),
			s[len(s)/2].Round(10*time.Microsecond), s[len(s)*9/10].Round(10*time.Microsecond), len(s), extra)
	}
}

// mdbMeasureFaults injects fault (replica-promote or failover) n times
// while 4 clients mdbContend for 3 names with 1s leases, and reports what
// the terms show.
func mdbMeasureFaults(t *testing.T, m *MariaDB, fault string, n int) {
	t.Helper()
	names := []string{"lock-0", "lock-1", "lock-2"}
	c := mdbContend(t, m.URL(), 4, names, time.Second)
	time.Sleep(3 * time.Second)
	var killAt []time.Time
	var promotions []time.Duration
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		err := m.Inject(ctx, fault)
		cancel()
		if err != nil {
			c.finish()
			t.Fatalf("%s %s %d: %v", m.Name(), fault, i+1, err)
		}
		killAt = append(killAt, m.LastKill())
		promotions = append(promotions, m.LastPromotion())
		time.Sleep(2 * time.Second)
	}
	terms := c.finish()
	t.Log(mdbAnalyse(m.Name()+" "+fault, terms, promotions, killAt, names))
}
