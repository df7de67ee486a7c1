package topology

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// needZK skips the test unless the test environment runs Zookeeper
// (SIMBA_TEST_ZK_SERVERS, which make test sets once the Debian package is
// installed): an ensemble can then be started from the same package. Under
// CI the variable must be set.
func needZK(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("an ensemble run takes tens of seconds")
	}
	if os.Getenv("SIMBA_TEST_ZK_SERVERS") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SIMBA_TEST_ZK_SERVERS is not set under CI: the ensemble test must run")
		}
		t.Skip("SIMBA_TEST_ZK_SERVERS is not set (make test sets it)")
	}
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		t.Fatalf("the zookeeper package is not installed (tools/testenv/up zk installs it): %v", err)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("no java for the zookeeper package: %v", err)
	}
}

// zkLease is the lease the clients ask for by default: with a 100ms tick
// the servers grant it whole.
const zkLease = time.Second

// runZKEnsemble starts an ensemble, lets three clients with the given
// lease contend on three lock names held briefly and one held for up to
// 2s, kills the leader and the busiest follower in turn (each rounds
// times), and sums up the run.
func runZKEnsemble(t *testing.T, rounds int, settle, lease time.Duration) *figures {
	t.Helper()
	needZK(t)
	ctx := context.Background()
	e, err := StartZKEnsemble(ctx, t.TempDir(), ZKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Down(ctx); err != nil {
			t.Error(err)
		}
	})
	c := contend(ctx, t, e.URL(), contentionOptions{nodes: 3, locks: 3, workers: 2,
		lease: lease, hold: 50 * time.Millisecond, longLocks: 1, longHold: time.Second})
	sleepCtx(ctx, settle)
	elections := map[string][]time.Duration{}
	for i := range rounds {
		for _, f := range e.Faults() {
			if err := e.Inject(ctx, f); err != nil {
				c.stop(t)
				t.Fatalf("round %d: %s: %v", i, f, err)
			}
			last := e.Last()
			c.fault(f, last.Member, last.Kill)
			elections[f] = append(elections[f], time.Duration(last.Serving-last.Kill))
			t.Logf("round %d: %s of zk-%d: served again after %v, rejoined after %v", i, f, last.Member,
				time.Duration(last.Serving-last.Kill).Round(time.Millisecond),
				time.Duration(last.Rejoined-last.Kill).Round(time.Millisecond))
			sleepCtx(ctx, settle)
		}
	}
	c.stop(t)
	fg := summarize(c.records(t), lease, settle)
	fg.elections = elections
	c.mu.Lock()
	t.Logf("sessions opened %d; events %v; failed acquires %v", c.sessions.Load(), c.events, c.errs)
	c.mu.Unlock()
	t.Logf("figures:\n%s", fg)
	return fg
}

// TestZKEnsembleFaults kills the leader and then the follower most
// clients are connected to, while clients contend: no two valid terms of
// a name overlap, tokens increase, and every name has a new term soon
// after each kill.
func TestZKEnsembleFaults(t *testing.T) {
	fg := runZKEnsemble(t, 1, 3*time.Second, zkLease)
	if fg.res.Failed() {
		t.Errorf("the checker found violations")
	}
	for _, f := range []string{LeaderKill, FollowerKill} {
		if fg.missing[f] > 0 || len(fg.worst[f]) != 1 {
			t.Errorf("%s: %d names without a new term within 3s of the kill", f, fg.missing[f])
		}
	}
}

// TestZKEnsembleMeasure is the measurement: SIMBA_TOPOLOGY_ZK_ROUNDS
// rounds of a leader kill and a follower kill under contention, with
// leases of SIMBA_TOPOLOGY_ZK_LEASE (default 1s).
func TestZKEnsembleMeasure(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SIMBA_TOPOLOGY_ZK_ROUNDS"))
	if rounds <= 0 {
		t.Skip("set SIMBA_TOPOLOGY_ZK_ROUNDS to the number of leader and follower kills")
	}
	lease := zkLease
	if v := os.Getenv("SIMBA_TOPOLOGY_ZK_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SIMBA_TOPOLOGY_ZK_LEASE=%q: want a positive duration", v)
		}
		lease = d
	}
	fg := runZKEnsemble(t, rounds, 4*time.Second, lease)
	if fg.res.Failed() {
		t.Errorf("the checker found violations")
	}
}

// TestZKEnsembleServe starts an ensemble for other tests to use and keeps
// it for SIMBA_TOPOLOGY_ZK_SERVE (a duration, e.g. 10m): it prints the
// SIMBA_TEST_ZK_ENSEMBLE the tests of backend-zk read, and writes that
// line to SIMBA_TOPOLOGY_ZK_ENV when set; removing that file stops the
// ensemble early.
func TestZKEnsembleServe(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("SIMBA_TOPOLOGY_ZK_SERVE"))
	if err != nil || d <= 0 {
		t.Skip("set SIMBA_TOPOLOGY_ZK_SERVE to how long the ensemble should run")
	}
	needZK(t)
	ctx := context.Background()
	e, err := StartZKEnsemble(ctx, t.TempDir(), ZKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Down(ctx); err != nil {
			t.Error(err)
		}
	}()
	line := "export SIMBA_TEST_ZK_ENSEMBLE='" + strings.Join(e.Addrs(), ",") + "'"
	t.Log(line)
	f := os.Getenv("SIMBA_TOPOLOGY_ZK_ENV")
	if f != "" {
		if err := os.WriteFile(f, []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(f)
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		if _, err := os.Stat(f); f != "" && err != nil {
			return
		}
	}
}
