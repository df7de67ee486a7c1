package simbapg

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

func TestSetupWarnings(t *testing.T) {
	for _, c := range []struct {
		name string
		s    serverSetup
		want []string
	}{
		{"one server, durable commits", serverSetup{syncCommit: "on"}, nil},
		{"one server, commits not durable", serverSetup{syncCommit: "off"}, []string{WarnCommitNotDurable}},
		{"asynchronous standby", serverSetup{syncCommit: "on", standbys: 1}, []string{WarnAsyncReplication}},
		{"synchronous standby", serverSetup{syncCommit: "on", syncStandbys: "*", standbys: 1}, nil},
		{"synchronous standby, remote_apply", serverSetup{syncCommit: "remote_apply", syncStandbys: "FIRST 1 (a, b)", standbys: 2}, nil},
		{"synchronous standby, remote_write", serverSetup{syncCommit: "remote_write", syncStandbys: "*", standbys: 1}, nil},
		{"synchronous standby but local commits", serverSetup{syncCommit: "local", syncStandbys: "*", standbys: 1}, []string{WarnAsyncReplication}},
		{"synchronous standby but commits off", serverSetup{syncCommit: "OFF", syncStandbys: "*", standbys: 1}, []string{WarnCommitNotDurable, WarnAsyncReplication}},
		{"standby names but no standby", serverSetup{syncCommit: "on", syncStandbys: " "}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, w := range c.s.warnings() {
				got = append(got, w.Code)
				if w.Message == "" {
					t.Errorf("%s: empty message", w.Code)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("warnings %v, want %v", got, c.want)
			}
		})
	}
}

// withParams returns raw with the run-time parameters params set.
func withParams(t *testing.T, raw string, params map[string]string) string {
	t.Helper()
	u := parseURL(t, raw)
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // a space pgx reads as one
	return u.String()
}

func grantWarnings(t *testing.T, raw string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := Open(ctx, raw, Options{TablePrefix: "simba_warn_", Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.CloseSession(ctx, g.ID) }()
	var codes []string
	for _, w := range g.Warnings {
		codes = append(codes, w.Code)
	}
	return codes
}

// TestServerSetupWarnings opens sessions on the server of
// SIMBA_TEST_POSTGRES_URL, a server without standbys, with the
// synchronous_commit and default_transaction_isolation of the
// connection set in the URL: only synchronous_commit = off is warned
// about. Every isolation level is one the statements support (ADR 0018;
// READ UNCOMMITTED runs as READ COMMITTED), so none is warned about.
func TestServerSetupWarnings(t *testing.T) {
	raw := os.Getenv("SIMBA_TEST_POSTGRES_URL")
	if raw == "" {
		t.Skip("SIMBA_TEST_POSTGRES_URL is not set")
	}
	for _, c := range []struct {
		params map[string]string
		want   []string
	}{
		{map[string]string{"synchronous_commit": "on"}, nil},
		{map[string]string{"synchronous_commit": "off"}, []string{WarnCommitNotDurable}},
		{map[string]string{"synchronous_commit": "on", "default_transaction_isolation": "read uncommitted"}, nil},
		{map[string]string{"synchronous_commit": "on", "default_transaction_isolation": "serializable"}, nil},
	} {
		if got := grantWarnings(t, withParams(t, raw, c.params)); !slices.Equal(got, c.want) {
			t.Errorf("with %v: warnings %v, want %v", c.params, got, c.want)
		}
	}
}

// TestServerSetupWarningOnceThroughTheEngine checks that a client of a
// connection with synchronous_commit = off logs the warning once and
// publishes it as an event once, for its one session.
func TestServerSetupWarningOnceThroughTheEngine(t *testing.T) {
	raw := os.Getenv("SIMBA_TEST_POSTGRES_URL")
	if raw == "" {
		t.Skip("SIMBA_TEST_POSTGRES_URL is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := Open(ctx, withParams(t, raw, map[string]string{"synchronous_commit": "off"}), Options{TablePrefix: "simba_warn_", Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var mu sync.Mutex
	var events []simba.Event
	var logs strings.Builder
	c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: 3 * time.Second}),
		simba.WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))),
		simba.WithEventListener(func(_ context.Context, e simba.Event) {
			if e.Kind == simba.EventBackendWarning {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	lt, err := c.Lock("warned").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // keep-alives, which warn of nothing
	if err := lt.Release(ctx); err != nil {
		t.Error(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || events[0].Warning.Code != WarnCommitNotDurable {
		t.Errorf("warning events %+v, want one %s", events, WarnCommitNotDurable)
	}
	if n := strings.Count(logs.String(), WarnCommitNotDurable); n != 1 {
		t.Errorf("the log names %s %d times, want once:\n%s", WarnCommitNotDurable, n, logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
