package suite_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/report"
	"github.com/simba-go/simba/tools/chaos/internal/suite"
	"github.com/simba-go/simba/tools/chaos/internal/topology"
)

// topologyEnv builds the node program and returns the run's environment
// maker; a failed run's histories are kept and named.
func topologyEnv(t *testing.T) func(name string) suite.Env {
	t.Helper()
	root, err := suite.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "simba-chaos-topology-") //nolint:usetesting // a failed run's histories are kept
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("histories and node logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	bin, err := suite.BuildNode(t.Context(), root, dir)
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) suite.Env {
		return suite.Env{Dir: filepath.Join(dir, name), NodeBin: bin, RepoRoot: root}
	}
}

// startTopology starts a registered topology for a test and stops it at
// the end of the test.
func startTopology(t *testing.T, e topology.Entry, dir string) topology.Topology {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	topo, err := e.Start(ctx, dir)
	if err != nil {
		t.Fatalf("%s does not start on this machine: %v", e.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
		defer cancel()
		if err := topo.Down(ctx); err != nil {
			t.Errorf("%s: down: %v", e.Name, err)
		}
	})
	return topo
}

// TestTopologies runs the short topology profile on every registered
// topology whose backend the test environment installs: two injections of
// each of its faults, every safety check passing. A topology that does
// not start fails the test; one documented as unbuildable is reported
// with its error.
func TestTopologies(t *testing.T) {
	if testing.Short() {
		t.Skip("the topologies take minutes")
	}
	env := topologyEnv(t)
	p := suite.TopologyShort()
	var outs []*suite.Outcome
	for _, name := range topology.Names() {
		// SIMBA_CHAOS_TOPOLOGIES=redis-single,zk-ensemble narrows a run by hand.
		if only := os.Getenv("SIMBA_CHAOS_TOPOLOGIES"); only != "" && !slices.Contains(strings.Split(only, ","), name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			e, err := topology.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			if e.Unbuildable != "" {
				t.Skipf("cannot be built from Debian's packages: %s", e.Unbuildable)
			}
			if v := serverVars[e.Backend]; os.Getenv(v) == "" {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s is not set under CI: the topology must run", v)
				}
				t.Skipf("%s not set; make test sets it", v)
			}
			topo := startTopology(t, e, filepath.Join(env(name).Dir, "servers"))
			out, err := suite.RunTopology(t.Context(), p, topo, env(name))
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, out)
			total := out.Result.Total()
			t.Logf("%d injections, %d handovers, %d terms, %d token regressions in %v", total.Injections,
				total.Handovers, total.Terms, total.TokenRegressions, out.Duration.Round(time.Second))
			for _, v := range out.Result.Violations {
				t.Error(v)
			}
			for _, f := range topo.Faults() {
				if n := injections(out, f); n < p.PerFault {
					t.Errorf("%s injected %d times, want %d", f, n, p.PerFault)
				}
			}
		})
	}
	if len(outs) > 0 {
		var b bytes.Buffer
		for _, o := range outs {
			report.TopologyTable(&b, o)
		}
		t.Log("\n" + b.String())
	}
}

func injections(out *suite.Outcome, fault string) int {
	for _, r := range out.Result.Rows {
		if r.Fault == fault {
			return r.Injections
		}
	}
	return 0
}

// TestRunTopologyOnASingleRedis runs RunTopology on redis-single with the
// node faults mixed in: its primary-kill loses every key; the run passes
// (tokens from the server's clock do not go back), the nodes work again
// only once the server is back, and the terms the fault ended are counted
// by reason.
func TestRunTopologyOnASingleRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes on a private Redis")
	}
	if os.Getenv("SIMBA_TEST_REDIS_URL") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SIMBA_TEST_REDIS_URL is not set under CI: the topology run must be tested")
		}
		t.Skip("SIMBA_TEST_REDIS_URL not set; make test sets it")
	}
	env := topologyEnv(t)("single")
	e, err := topology.Lookup("redis-single")
	if err != nil {
		t.Fatal(err)
	}
	topo := startTopology(t, e, filepath.Join(env.Dir, "servers"))
	p := suite.TopologyShort()
	p.Faults, p.PerFault = suite.NodeFaults, 3 // PK, sigkill, PK, sigstop, PK
	out, err := suite.RunTopology(t.Context(), p, topo, env)
	if err != nil {
		t.Fatal(err)
	}
	res := out.Result
	if res.Failed() {
		t.Fatalf("violations: %v", res.Violations)
	}
	if res.TokensMayGoBack != topo.TokensMayGoBack() || out.Topology != "redis-single" || out.Backend != "redis" {
		t.Errorf("outcome %+v: want redis-single on redis, tokens allowed to go back as the topology says", out)
	}
	pkInjections := 0
	for _, r := range res.Rows {
		switch r.Fault {
		case topology.PrimaryKill:
			pkInjections = r.Injections
			if len(r.WorkAgain) != r.Injections {
				t.Errorf("%d times to work again for %d injections", len(r.WorkAgain), r.Injections)
			}
			for _, d := range r.WorkAgain {
				if d < topology.SingleDownTime {
					t.Errorf("worked again %v after the kill, before the server was back (%v)", d, topology.SingleDownTime)
				}
			}
			if len(r.Ended) == 0 {
				t.Error("no term ended around a primary kill")
			}
			t.Logf("primary-kill: work again %v, ended %v, %d regressions, largest drop %d", r.WorkAgain, r.Ended,
				r.TokenRegressions, r.MaxTokenDrop)
		case suite.SigKill, suite.SigStop:
			if r.Injections == 0 || len(r.WorkAgain) != 0 {
				t.Errorf("%s: %d injections, %d times to work again: want a node fault, not a server one", r.Fault,
					r.Injections, len(r.WorkAgain))
			}
		}
	}
	if pkInjections < p.PerFault {
		t.Fatalf("primary-kill injected %d times, want %d", pkInjections, p.PerFault)
	}
	if tot := res.Total(); tot.Overlaps != 0 || tot.StaleAccepted != 0 {
		t.Errorf("overlaps %d, stale accepted %d", tot.Overlaps, tot.StaleAccepted)
	}
}

// fakeTopology is a topology that is never started: for the checks
// RunTopology makes before it runs anything.
type fakeTopology struct {
	backend string
	faults  []string
}

func (f fakeTopology) Name() string                         { return "fake" }
func (f fakeTopology) Backend() string                      { return f.backend }
func (f fakeTopology) URL() string                          { return "redis://127.0.0.1:1/0" }
func (f fakeTopology) Faults() []string                     { return f.faults }
func (f fakeTopology) Inject(context.Context, string) error { return nil }
func (f fakeTopology) TokensMayGoBack() bool                { return false }
func (f fakeTopology) Down(context.Context) error           { return nil }

func TestRunTopologyRefusesWhatItCannotRun(t *testing.T) {
	good := fakeTopology{backend: "redis", faults: []string{topology.PrimaryKill}}
	for _, tt := range []struct {
		name   string
		topo   topology.Topology
		faults []string
	}{
		{"a proxy fault mixed in", good, []string{suite.BlackHole}},
		{"a topology without faults", fakeTopology{backend: "redis"}, nil},
		{"an unknown backend", fakeTopology{backend: "etcd", faults: []string{topology.PrimaryKill}}, nil},
	} {
		p := suite.TopologyShort()
		p.Faults = tt.faults
		_, err := suite.RunTopology(t.Context(), p, tt.topo, suite.Env{Dir: t.TempDir()})
		if !errors.Is(err, suite.ErrProfile) {
			t.Errorf("%s: error %v, want ErrProfile", tt.name, err)
		}
	}
}
