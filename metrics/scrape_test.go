package simbametrics_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	simbametrics "github.com/simba-go/simba/metrics"
)

// TestScrape scrapes a node's registry through promhttp on a real HTTP
// server, as Prometheus would, on the real clock.
func TestScrape(t *testing.T) {
	col, err := simbametrics.New()
	if err != nil {
		t.Fatal(err)
	}
	client, err := simba.New(memory.New().Connect(),
		simba.WithConfig(simba.Config{LeaseDuration: 3 * time.Second}),
		simba.WithLogger(slog.New(slog.DiscardHandler)),
		simba.WithEventListener(col.Observe))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close(context.Background()) }()
	col.Attach(client)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lt, err := client.Lock("invoice").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lt.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Election("report").Start(simba.ListenerFuncs{}); err != nil {
		t.Fatal(err)
	}

	expected := `
# HELP simba_session_status The session status: 1 for the current one (OPENING, LIVE, SUSPENDED or CLOSED), 0 for the others.
# TYPE simba_session_status gauge
simba_session_status{status="CLOSED"} 0
simba_session_status{status="LIVE"} 1
simba_session_status{status="OPENING"} 0
simba_session_status{status="SUSPENDED"} 0
# HELP simba_terms_won_total Terms won, by kind (election or lock) and lease.
# TYPE simba_terms_won_total counter
simba_terms_won_total{kind="election",lease="report"} 1
simba_terms_won_total{kind="lock",lease="*"} 1
# HELP simba_terms_ended_total Terms ended, by kind, lease and reason (STOPPED, STEPPED_DOWN, DEADLINE_PASSED, SESSION_EXPIRED, TAKEN_OVER).
# TYPE simba_terms_ended_total counter
simba_terms_ended_total{kind="election",lease="report",reason="DEADLINE_PASSED"} 0
simba_terms_ended_total{kind="election",lease="report",reason="SESSION_EXPIRED"} 0
simba_terms_ended_total{kind="election",lease="report",reason="STEPPED_DOWN"} 0
simba_terms_ended_total{kind="election",lease="report",reason="STOPPED"} 0
simba_terms_ended_total{kind="election",lease="report",reason="TAKEN_OVER"} 0
simba_terms_ended_total{kind="lock",lease="*",reason="DEADLINE_PASSED"} 0
simba_terms_ended_total{kind="lock",lease="*",reason="SESSION_EXPIRED"} 0
simba_terms_ended_total{kind="lock",lease="*",reason="STOPPED"} 1
simba_terms_ended_total{kind="lock",lease="*",reason="TAKEN_OVER"} 0
`
	names := []string{"simba_session_status", "simba_terms_won_total", "simba_terms_ended_total"}
	for {
		err = testutil.ScrapeAndCompare(srv.URL, strings.NewReader(expected), names...)
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}

	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`simba_lock_acquire_wait_seconds_count{lease="*"} 1`,
		`simba_session_lease_duration_seconds 3`,
		`simba_session_renew_interval_seconds 1`,
		`simba_term_remaining_seconds{kind="election",lease="report"} `,
	} {
		if !strings.Contains(string(body), line) {
			t.Errorf("the scrape has no %q:\n%s", line, body)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
