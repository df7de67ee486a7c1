package suite_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/tools/chaos/internal/report"
	"github.com/simba-go/simba/tools/chaos/internal/suite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serverVars says which backend a SIMBA_TEST_* variable stands for: the
// suite runs its own servers, but only where the test environment says
// that server's packages are installed and meant to run.
var serverVars = map[string]string{
	"redis":    "SIMBA_TEST_REDIS_URL",
	"postgres": "SIMBA_TEST_POSTGRES_URL",
	"mysql":    "SIMBA_TEST_MYSQL_URL",
	"zk":       "SIMBA_TEST_ZK_SERVERS",
}

// TestCIProfile is make chaos: the CI profile on every backend, at least
// 500 handovers each, every check passing.
func TestCIProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("the robustness suite takes minutes")
	}
	root, err := suite.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "simba-chaos-test-") //nolint:usetesting // a failed run's histories are kept
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
	p := suite.CI()
	var outs []*suite.Outcome
	for _, b := range suite.Backends {
		// SIMBA_CHAOS_BACKENDS=redis,zk narrows a run by hand.
		if only := os.Getenv("SIMBA_CHAOS_BACKENDS"); only != "" && !slices.Contains(strings.Split(only, ","), b) {
			continue
		}
		if os.Getenv(serverVars[b]) == "" {
			if os.Getenv("CI") != "" {
				t.Errorf("%s is not set under CI: the robustness suite must run on %s", serverVars[b], b)
			} else {
				t.Logf("%s: skipped (%s not set; make test sets it)", b, serverVars[b])
			}
			continue
		}
		began := time.Now()
		out, err := suite.Run(t.Context(), p, b, suite.Env{Dir: filepath.Join(dir, b), NodeBin: bin, RepoRoot: root})
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		outs = append(outs, out)
		total := out.Result.Total()
		t.Logf("%s: %d handovers, %d terms, %d writes in %v", b, total.Handovers, total.Terms, total.Writes,
			time.Since(began).Round(time.Second))
		for _, v := range out.Result.Violations {
			t.Errorf("%s: %s", b, v)
		}
		if total.Handovers < p.Handovers {
			t.Errorf("%s: %d handovers, want at least %d", b, total.Handovers, p.Handovers)
		}
		for _, r := range out.Result.Rows {
			if r.Fault != "none" && r.Injections < p.PerFault {
				t.Errorf("%s: %s injected %d times, want at least %d", b, r.Fault, r.Injections, p.PerFault)
			}
		}
	}
	if len(outs) == 0 {
		t.Skip("no SIMBA_TEST_* server variable set")
	}
	var table bytes.Buffer
	report.Table(&table, outs)
	t.Log("\n" + table.String())
}
