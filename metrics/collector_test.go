package simbametrics_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	simbametrics "github.com/simba-go/simba/metrics"
)

// get returns one series of the registry, failing the test when it is
// missing.
func get(t *testing.T, g prometheus.Gatherer, key string) float64 {
	t.Helper()
	all := series(t, g)
	v, ok := all[key]
	if !ok {
		t.Fatalf("no series %s; have:\n%s", key, keys(all))
	}
	return v
}

func TestTermsWonAndEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a := newNode(t, srv, "a")
		a.waitLive(t)
		el := a.lead(t, "report")
		lt, err := a.client.Lock("invoice").Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_terms_won_total{kind="election",lease="report"}`:                            1,
			`simba_terms_won_total{kind="lock",lease="*"}`:                                     1,
			`simba_terms_ended_total{kind="election",lease="report",reason="STOPPED"}`:         0,
			`simba_terms_ended_total{kind="election",lease="report",reason="STEPPED_DOWN"}`:    0,
			`simba_terms_ended_total{kind="election",lease="report",reason="DEADLINE_PASSED"}`: 0,
			`simba_terms_ended_total{kind="election",lease="report",reason="SESSION_EXPIRED"}`: 0,
			`simba_terms_ended_total{kind="election",lease="report",reason="TAKEN_OVER"}`:      0,
			`simba_terms_ended_total{kind="lock",lease="*",reason="STOPPED"}`:                  0,
			`simba_leader_work_failures_total{lease="report"}`:                                 0,
			`simba_leader_work_panics_total{lease="report"}`:                                   0,
			`simba_listener_panics_total{lease="report"}`:                                      0,
			// On the fake clock an uncontended acquisition waits no time:
			// the snapshot tells the lock apart.
			`simba_lock_acquire_wait_seconds_count{lease="*"}`: 1,
			`simba_lock_acquire_wait_seconds_sum{lease="*"}`:   0,
		})
		absent(t, a.reg, `simba_terms_ended_total{kind="lock",lease="*",reason="STEPPED_DOWN"}`)
		for _, key := range []string{
			`simba_term_remaining_seconds{kind="election",lease="report"}`,
			`simba_term_remaining_seconds{kind="lock",lease="*"}`,
		} {
			if v := get(t, a.reg, key); v <= 2 || v > 3 {
				t.Errorf("%s = %v, want in (2s, 3s]", key, v)
			}
		}

		// B waits 2s for the lock A holds.
		b := newNode(t, srv, "b")
		b.waitLive(t)
		got := make(chan *simba.LockTerm, 1)
		go func() {
			lt, err := b.client.Lock("invoice").Acquire(t.Context())
			if err != nil {
				t.Error(err)
			}
			got <- lt
		}()
		time.Sleep(2 * time.Second)
		if err := lt.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		blt := <-got
		if err := el.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_terms_ended_total{kind="election",lease="report",reason="STOPPED"}`: 1,
			`simba_terms_ended_total{kind="lock",lease="*",reason="STOPPED"}`:          1,
		})
		absent(t, a.reg, "simba_term_remaining_seconds")
		want(t, b.reg, map[string]float64{
			`simba_terms_won_total{kind="lock",lease="*"}`:     1,
			`simba_lock_acquire_wait_seconds_count{lease="*"}`: 1,
		})
		if w := get(t, b.reg, `simba_lock_acquire_wait_seconds_sum{lease="*"}`); w < 2 || w > 2.5 {
			t.Errorf("B waited %vs, want about 2s", w)
		}
		_ = blt.Release(t.Context())
	})
}

func TestSessionStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		srv := memory.New()
		a := newNode(t, srv, "a")
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_session_status{status="LIVE"}`:                  1,
			`simba_session_status{status="OPENING"}`:               0,
			`simba_session_status{status="SUSPENDED"}`:             0,
			`simba_session_status{status="CLOSED"}`:                0,
			`simba_session_status_change_timestamp_seconds`:        unix(start),
			`simba_sessions_opened_total`:                          1,
			`simba_sessions_ended_total{reason="CLOSED"}`:          0,
			`simba_sessions_ended_total{reason="DEADLINE_PASSED"}`: 0,
			`simba_sessions_ended_total{reason="SESSION_EXPIRED"}`: 0,
			`simba_session_remaining_seconds`:                      3,
			`simba_session_renew_interval_seconds`:                 1,
			`simba_session_lease_duration_seconds`:                 3,
			`simba_keepalive_duration_seconds_count`:               0,
			`simba_session_suspensions_total`:                      0,
			`simba_keepalive_failures_total`:                       0,
		})
		a.lead(t, "report")

		// The keep-alive sent at 1s is stalled: it gives up at 2s.
		a.conn.Stall()
		time.Sleep(2*time.Second - time.Since(start))
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_session_status{status="SUSPENDED"}`:      1,
			`simba_session_status{status="LIVE"}`:           0,
			`simba_session_status_change_timestamp_seconds`: unix(start.Add(2 * time.Second)),
			`simba_session_suspensions_total`:               1,
			`simba_keepalive_failures_total`:                1,
			`simba_keepalive_duration_seconds_count`:        1,
			`simba_keepalive_duration_seconds_sum`:          1, // the call waited its whole second
			`simba_session_remaining_seconds`:               1,
		})

		// Healed, the next retry (at 2.5s) restores it.
		a.conn.Unstall()
		time.Sleep(time.Second)
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_session_status{status="LIVE"}`:      1,
			`simba_session_status{status="SUSPENDED"}`: 0,
			`simba_keepalive_failures_total`:           1,
			`simba_keepalive_duration_seconds_count`:   2,
		})

		// The backend expires the session: the term ends with it.
		srv.ExpireSession(a.client.Snapshot().Session.ID)
		time.Sleep(time.Second)
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_sessions_ended_total{reason="SESSION_EXPIRED"}`:                             1,
			`simba_terms_ended_total{kind="election",lease="report",reason="SESSION_EXPIRED"}`: 1,
			`simba_sessions_opened_total`:                                                      2,
			`simba_session_status{status="LIVE"}`:                                              1,
		})

		// Stalled for a whole lease: the deadline passes.
		a.conn.Stall()
		time.Sleep(4 * time.Second)
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_sessions_ended_total{reason="DEADLINE_PASSED"}`:                             1,
			`simba_terms_ended_total{kind="election",lease="report",reason="DEADLINE_PASSED"}`: 1,
			`simba_session_status{status="OPENING"}`:                                           1,
			`simba_session_remaining_seconds`:                                                  0,
		})
		a.conn.Unstall()
		time.Sleep(time.Second)

		if err := a.client.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		closed := time.Now()
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_session_status{status="CLOSED"}`:         1,
			`simba_session_status{status="LIVE"}`:           0,
			`simba_session_status_change_timestamp_seconds`: unix(closed),
			`simba_sessions_ended_total{reason="CLOSED"}`:   1,
		})
	})
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func TestKeepAliveRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a := newNode(t, srv, "a")
		a.waitLive(t)
		a.conn.Delay(40 * time.Millisecond)
		time.Sleep(3500 * time.Millisecond) // keep-alives at 1s, 2s and 3s
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_keepalive_duration_seconds_count`: 3,
			`simba_keepalive_failures_total`:         0,
		})
		if sum := get(t, a.reg, `simba_keepalive_duration_seconds_sum`); sum < 0.119 || sum > 0.121 {
			t.Errorf("sum of round trips %vs, want 0.12s", sum)
		}
		err := testutil.GatherAndCompare(a.reg, strings.NewReader(`
# HELP simba_keepalive_duration_seconds Round trip of the session's keep-alive calls, failed calls included.
# TYPE simba_keepalive_duration_seconds histogram
simba_keepalive_duration_seconds_bucket{le="0.001"} 0
simba_keepalive_duration_seconds_bucket{le="0.0025"} 0
simba_keepalive_duration_seconds_bucket{le="0.005"} 0
simba_keepalive_duration_seconds_bucket{le="0.01"} 0
simba_keepalive_duration_seconds_bucket{le="0.025"} 0
simba_keepalive_duration_seconds_bucket{le="0.05"} 3
simba_keepalive_duration_seconds_bucket{le="0.1"} 3
simba_keepalive_duration_seconds_bucket{le="0.25"} 3
simba_keepalive_duration_seconds_bucket{le="0.5"} 3
simba_keepalive_duration_seconds_bucket{le="1"} 3
simba_keepalive_duration_seconds_bucket{le="2.5"} 3
simba_keepalive_duration_seconds_bucket{le="5"} 3
simba_keepalive_duration_seconds_bucket{le="+Inf"} 3
simba_keepalive_duration_seconds_sum 0.12
simba_keepalive_duration_seconds_count 3
`), "simba_keepalive_duration_seconds")
		if err != nil {
			t.Error(err)
		}

		a.conn.Delay(0)
		a.conn.Fail(errors.New("connection reset"))
		time.Sleep(time.Second)
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_keepalive_duration_seconds_count`: 4,
			`simba_keepalive_failures_total`:         1,
		})
		a.conn.Heal()
	})
}

func TestLeaderWorkAndListenerFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a := newNode(t, srv, "a")
		a.waitLive(t)
		ctx, cancel := context.WithCancel(t.Context())
		runs := 0
		done := make(chan error, 1)
		go func() {
			done <- a.client.Election("job").RunWhileLeader(ctx, func(ctx context.Context, _ *simba.Term) error {
				runs++
				switch runs {
				case 1:
					return errors.New("disk full")
				case 2:
					panic("nil map")
				}
				<-ctx.Done()
				return nil
			}, simba.StepDownOnError(time.Second))
		}()
		// The listener of "audit" panics in OnElected: the election steps
		// down for a lease duration and takes the lease again.
		if err := a.client.Election("audit").Start(simba.ListenerFuncs{
			Elected: func(context.Context, *simba.Term) { panic("listener bug") },
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		// The first run failed at once, the second (after the one-second
		// cooldown) panicked, the third runs.
		want(t, a.reg, map[string]float64{
			`simba_leader_work_failures_total{lease="job"}`:                                2,
			`simba_leader_work_panics_total{lease="job"}`:                                  1,
			`simba_leader_work_failures_total{lease="audit"}`:                              0,
			`simba_listener_panics_total{lease="audit"}`:                                   1,
			`simba_terms_ended_total{kind="election",lease="job",reason="STEPPED_DOWN"}`:   2,
			`simba_terms_ended_total{kind="election",lease="audit",reason="STEPPED_DOWN"}`: 1,
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want(t, a.reg, map[string]float64{`simba_leader_work_failures_total{lease="job"}`: 2})
	})
}

func TestGroupPartitionsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a, b := newNode(t, srv, "a"), newNode(t, srv, "b")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		work := func(ctx context.Context, _ int, _ *simba.Term) error { <-ctx.Done(); return nil }
		done := make(chan error, 2)
		for _, n := range []*node{a, b} {
			go func() { done <- n.client.Group("jobs", 4).Run(ctx, work) }()
		}
		time.Sleep(20 * time.Second)
		synctest.Wait()
		want(t, a.reg, map[string]float64{`simba_group_partitions_held{group="jobs"}`: 2})
		want(t, b.reg, map[string]float64{`simba_group_partitions_held{group="jobs"}`: 2})
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		absent(t, a.reg, "simba_group_partitions_held")
	})
}

func TestLeaseLabel(t *testing.T) {
	tests := []struct {
		give string
		opts []simbametrics.Option
		want []string
	}{
		{
			give: "default: elections by name, every lock as *",
			want: []string{
				`simba_terms_won_total{kind="election",lease="report"}`,
				`simba_terms_won_total{kind="lock",lease="*"}`,
				`simba_term_remaining_seconds{kind="lock",lease="*"}`,
				`simba_lock_acquire_wait_seconds_count{lease="*"}`,
			},
		},
		{
			give: "mapped: locks by prefix, the rest as *",
			opts: []simbametrics.Option{simbametrics.WithLeaseLabel(func(name string) string {
				prefix, _, _ := strings.Cut(name, ".")
				if prefix == "invoice" {
					return prefix
				}
				return ""
			})},
			want: []string{
				`simba_terms_won_total{kind="election",lease="*"}`,
				`simba_terms_won_total{kind="lock",lease="invoice"}`,
				`simba_term_remaining_seconds{kind="lock",lease="invoice"}`,
				`simba_lock_acquire_wait_seconds_count{lease="invoice"}`,
			},
		},
		{
			give: "without the label",
			opts: []simbametrics.Option{simbametrics.WithoutLeaseLabel()},
			want: []string{
				`simba_terms_won_total{kind="election"}`,
				`simba_terms_won_total{kind="lock"}`,
				`simba_term_remaining_seconds{kind="lock"}`,
				`simba_lock_acquire_wait_seconds_count`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newNode(t, memory.New(), "a", tt.opts...)
				a.waitLive(t)
				a.lead(t, "report")
				for _, name := range []string{"invoice.1", "invoice.2"} {
					if _, err := a.client.Lock(name).Acquire(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				got := series(t, a.reg)
				for _, k := range tt.want {
					if _, ok := got[k]; !ok {
						t.Errorf("no series %s; have:\n%s", k, keys(got))
					}
				}
				var won float64
				for k, v := range got {
					if strings.HasPrefix(k, "simba_terms_won_total") {
						won += v
					}
				}
				if won != 3 {
					t.Errorf("terms won: %v, want 3", won)
				}
				if problems, err := testutil.GatherAndLint(a.reg); err != nil || len(problems) > 0 {
					t.Errorf("lint: %v %v", problems, err)
				}
			})
		})
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	for _, tt := range []struct {
		give []simbametrics.Option
		want string
	}{
		{[]simbametrics.Option{nil}, "option 0 is nil"},
		{[]simbametrics.Option{simbametrics.WithLeaseLabel(nil)}, "WithLeaseLabel with a nil function"},
		{[]simbametrics.Option{simbametrics.WithKeepAliveBuckets()}, "WithKeepAliveBuckets with no bucket"},
		{[]simbametrics.Option{simbametrics.WithKeepAliveBuckets(.1, .1)}, "bucket 1 (0.1) is not above bucket 0 (0.1)"},
		{[]simbametrics.Option{simbametrics.WithAcquireWaitBuckets(1, .5)}, "WithAcquireWaitBuckets: bucket 1 (0.5)"},
		{[]simbametrics.Option{simbametrics.WithAcquireWaitBuckets(1, math.Inf(1))}, "bucket 1 is +Inf"},
		{[]simbametrics.Option{simbametrics.WithKeepAliveBuckets(math.NaN())}, "bucket 0 is NaN"},
	} {
		col, err := simbametrics.New(tt.give...)
		if col != nil || !errors.Is(err, simbametrics.ErrInvalidOption) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New: %v, %v; want an ErrInvalidOption saying %q", col, err, tt.want)
		}
	}
	if _, err := simbametrics.New(simbametrics.WithKeepAliveBuckets(.01, .1, 1), simbametrics.WithAcquireWaitBuckets(1)); err != nil {
		t.Errorf("New with valid buckets: %v", err)
	}
}

// TestLint exercises every metric, then lints the whole exposition.
func TestLint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a := newNode(t, srv, "a")
		a.waitLive(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 2)
		go func() {
			done <- a.client.Group("jobs", 2).Run(ctx, func(context.Context, int, *simba.Term) error {
				panic("partition bug")
			}, simba.StepDownOnError(time.Second))
		}()
		go func() {
			done <- a.client.Election("audit").RunWhileLeader(ctx, func(context.Context, *simba.Term) error {
				return errors.New("failed")
			}, simba.StepDownOnError(time.Second))
		}()
		if err := a.client.Election("report").Start(simba.ListenerFuncs{
			Elected: func(context.Context, *simba.Term) { panic("listener bug") },
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.client.Lock("invoice").Acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		a.conn.Fail(errors.New("down"))
		time.Sleep(1500 * time.Millisecond)
		a.conn.Heal()
		time.Sleep(time.Second)
		synctest.Wait()

		names := make(map[string]bool)
		for k := range series(t, a.reg) {
			name, _, _ := strings.Cut(k, "{")
			names[name] = true
		}
		for _, name := range []string{
			"simba_session_status", "simba_session_status_change_timestamp_seconds", "simba_session_remaining_seconds",
			"simba_session_renew_interval_seconds", "simba_session_lease_duration_seconds", "simba_sessions_opened_total",
			"simba_sessions_ended_total", "simba_session_suspensions_total", "simba_keepalive_duration_seconds_count",
			"simba_keepalive_failures_total", "simba_backend_errors_total", "simba_terms_won_total", "simba_terms_ended_total",
			"simba_term_remaining_seconds", "simba_lock_acquire_wait_seconds_count", "simba_leader_work_failures_total",
			"simba_leader_work_panics_total", "simba_listener_panics_total", "simba_group_partitions_held",
		} {
			if !names[name] {
				t.Errorf("no series of %s", name)
			}
		}
		got := series(t, a.reg)
		for _, k := range []string{
			`simba_leader_work_panics_total{lease="jobs.0"}`,
			`simba_leader_work_panics_total{lease="jobs.1"}`,
			`simba_leader_work_failures_total{lease="jobs.0"}`,
			`simba_leader_work_failures_total{lease="audit"}`,
			`simba_listener_panics_total{lease="report"}`,
			`simba_backend_errors_total`,
			`simba_keepalive_failures_total`,
		} {
			if got[k] < 1 {
				t.Errorf("%s = %v, want at least 1", k, got[k])
			}
		}
		if p := got[`simba_leader_work_panics_total{lease="audit"}`]; p != 0 {
			t.Errorf("panics of audit = %v, want 0: its work returned errors", p)
		}
		problems, err := testutil.GatherAndLint(a.reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	})
}

// TestAttachLater shows what a Collector reports before Attach: the
// metrics of events only.
func TestAttachLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newNode(t, memory.New(), "a")
		a.col.Attach(nil)
		a.waitLive(t)
		a.lead(t, "report")
		synctest.Wait()
		want(t, a.reg, map[string]float64{
			`simba_session_status{status="LIVE"}`:                   1,
			`simba_terms_won_total{kind="election",lease="report"}`: 1,
		})
		absent(t, a.reg, "simba_session_remaining_seconds", "simba_term_remaining_seconds", "simba_session_renew_interval_seconds")
		a.col.Attach(a.client)
		want(t, a.reg, map[string]float64{`simba_session_renew_interval_seconds`: 1})
	})
}

// TestTwoClients registers the collectors of two clients in one registry,
// told apart by a label, as the package documentation suggests.
func TestTwoClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		a, b := newNode(t, srv, "a"), newNode(t, srv, "b")
		reg := prometheus.NewPedanticRegistry()
		prometheus.WrapRegistererWith(prometheus.Labels{"client": "a"}, reg).MustRegister(a.col)
		prometheus.WrapRegistererWith(prometheus.Labels{"client": "b"}, reg).MustRegister(b.col)
		a.waitLive(t)
		b.waitLive(t)
		synctest.Wait()
		want(t, reg, map[string]float64{
			`simba_session_status{client="a",status="LIVE"}`: 1,
			`simba_session_status{client="b",status="LIVE"}`: 1,
		})
	})
}

func TestPartitionOf(t *testing.T) {
	tests := []struct {
		give      string
		wantGroup string
		wantPart  int
		wantOK    bool
	}{
		{give: "jobs.0", wantGroup: "jobs", wantPart: 0, wantOK: true},
		{give: "jobs.17", wantGroup: "jobs", wantPart: 17, wantOK: true},
		{give: "a.b.4095", wantGroup: "a.b", wantPart: 4095, wantOK: true},
		{give: "jobs.4096"},
		{give: "jobs.07"},
		{give: "jobs.-1"},
		{give: "jobs.+1"},
		{give: "jobs."},
		{give: ".1"},
		{give: "jobs"},
		{give: "jobs.x"},
	}
	for _, tt := range tests {
		g, p, ok := simbametrics.PartitionOf(tt.give)
		if g != tt.wantGroup || p != tt.wantPart || ok != tt.wantOK {
			t.Errorf("PartitionOf(%q) = %q, %d, %v; want %q, %d, %v", tt.give, g, p, ok, tt.wantGroup, tt.wantPart, tt.wantOK)
		}
	}
}

// simba_events_dropped_total counts the events the client dropped for a
// listener that fell behind, whichever listener it was.
func TestEventsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, err := simbametrics.New()
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(col)
		gate := make(chan struct{})
		var blocked sync.Once
		client, err := simba.New(memory.New().Connect(),
			simba.WithConfig(testConfig()),
			simba.WithLogger(slog.New(slog.DiscardHandler)),
			simba.WithEventListener(col.Observe),
			simba.WithEventListener(func(context.Context, simba.Event) { blocked.Do(func() { <-gate }) }),
			simba.WithEventBuffer(10))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = client.Close(context.Background()) }()
		defer close(gate)
		col.Attach(client)
		synctest.Wait() // the session opened; the second listener blocks on it
		l := client.Lock("dropped")
		for range 20 {
			lt, err := l.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := lt.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the collector keeps up
		}
		// SessionOpened was taken; 40 lock events followed into a queue of 10.
		want(t, reg, map[string]float64{"simba_events_dropped_total": 30})
		if got := client.EventsDropped(); got != 30 {
			t.Fatalf("EventsDropped() = %d, want 30", got)
		}
	})
}

func TestBackendWarnings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		col, err := simbametrics.New()
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(col)
		srv := memory.New()
		srv.SetWarnings(simba.Warning{Code: "replicas-without-wait", Message: "replicas without the durable option"})
		client, err := simba.New(srv, simba.WithConfig(testConfig()),
			simba.WithLogger(slog.New(slog.DiscardHandler)), simba.WithEventListener(col.Observe))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = client.Close(context.Background()) }()
		synctest.Wait()
		want(t, reg, map[string]float64{`simba_backend_warnings_total{code="replicas-without-wait"}`: 1})
		srv.ExpireSession(client.Snapshot().Session.ID)
		time.Sleep(2 * testConfig().RenewInterval)
		synctest.Wait()
		want(t, reg, map[string]float64{`simba_backend_warnings_total{code="replicas-without-wait"}`: 2})
	})
}
