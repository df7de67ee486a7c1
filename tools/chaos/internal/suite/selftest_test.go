package suite_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/suite"
)

// TestBrokenBuildsFail shows that the suite catches broken builds: nodes
// run with a deliberate bug (package broken) under the fault that exposes
// it, and the check must fail with the violation the bug causes. It lives
// in this package so that it never runs beside TestCIProfile: two runs at
// once would share the machine's cores and blur each other's timing.
func TestBrokenBuildsFail(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes on a private Redis")
	}
	if os.Getenv("SIMBA_TEST_REDIS_URL") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SIMBA_TEST_REDIS_URL is not set under CI: the self-test of the robustness suite must run")
		}
		t.Skip("SIMBA_TEST_REDIS_URL not set; make test sets it")
	}
	root, err := suite.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, err := suite.BuildNode(t.Context(), root, dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		broken  string
		faults  []string
		locks   int
		workers int
		want    func(check.Row) int
		what    string
	}{
		// A holder paused past its lease believes in its term for half a
		// lease more than the backend keeps it.
		{"margin", []string{suite.SigStop}, 8, 1, func(r check.Row) int { return r.Overlaps }, "overlaps"},
		// A leader whose session was deleted goes on leading. Elections
		// only: a lock's next acquisition would find the session gone.
		{"revive", []string{suite.Evict}, 0, 1, func(r check.Row) int { return r.Overlaps }, "overlaps"},
		// A late release of an old term frees the newer term the same
		// client won meanwhile (two goroutines per lock hand it over).
		{"release", []string{suite.Slow}, 8, 2, func(r check.Row) int { return r.Overlaps }, "overlaps"},
	}
	for _, tt := range tests {
		t.Run(tt.broken, func(t *testing.T) {
			p := suite.CI()
			p.Name, p.Broken, p.Faults, p.Locks, p.Workers = "selftest-"+tt.broken, tt.broken, tt.faults, tt.locks, tt.workers
			p.Idle = 30 * time.Millisecond
			if tt.broken == "revive" {
				// A revived node never wins again (its session is gone); more
				// nodes give the eviction more leaders to hit mid-term.
				p.Nodes = 5
			}
			p.Handovers, p.PerFault, p.MaxDuration = 50, 3, 20*time.Second
			out, err := suite.Run(t.Context(), p, "redis", suite.Env{Dir: filepath.Join(dir, tt.broken), NodeBin: bin, RepoRoot: root})
			if err != nil {
				t.Fatal(err)
			}
			total := out.Result.Total()
			if !out.Result.Failed() || tt.want(total) == 0 {
				t.Fatalf("the check passed the %s bug: %d %s, violations %v", tt.broken, tt.want(total), tt.what, out.Result.Violations)
			}
			t.Logf("%s: %d %s, first violation: %s", tt.broken, tt.want(total), tt.what, out.Result.Violations[0])
		})
	}
}
