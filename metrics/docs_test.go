package simbametrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	simba "github.com/simba-go/simba/core"
	simbametrics "github.com/simba-go/simba/metrics"
)

// docs are the documents that name metrics (their ```go blocks are
// compiled by the features module's TestSnippetsCompile).
var docs = []string{"README.md", "../docs/observability.md"}

// metricNames returns the names of every metric a Collector describes,
// with the _bucket, _count and _sum series of its histograms.
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	col, err := simbametrics.New()
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 100)
	col.Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	names := make(map[string]bool)
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		names[m[1]] = true
	}
	// One observation in each histogram, to learn which they are.
	col.Observe(context.Background(), simba.Event{Kind: simba.EventKeepAlive, Latency: time.Millisecond})
	col.Observe(context.Background(), simba.Event{Kind: simba.EventElected, Name: "x", Token: 1, Waited: time.Millisecond, Lock: true})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	histograms := 0
	for _, mf := range mfs {
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			histograms++
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	if histograms != 2 {
		t.Fatalf("%d histograms, want 2", histograms)
	}
	return names
}

var metricRef = regexp.MustCompile(`\bsimba_[a-z_]+\b`)

// checkRefs fails for every simba_ name in text that the Collector does
// not export.
func checkRefs(t *testing.T, what, text string, names map[string]bool) {
	t.Helper()
	for _, ref := range metricRef.FindAllString(text, -1) {
		if !names[ref] {
			t.Errorf("%s names %s, which the Collector does not export", what, ref)
		}
	}
}

// TestDocsNameExportedMetrics checks that the documents, the rules and
// the dashboard only name metrics the Collector exports, and that the
// README lists every one of them.
func TestDocsNameExportedMetrics(t *testing.T) {
	names := metricNames(t)
	for _, f := range append([]string{"alerts.yml", "alerts_test.yml", "dashboard.json"}, docs...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkRefs(t, f, string(data), names)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range names {
		if !strings.HasSuffix(name, "_bucket") && !strings.HasSuffix(name, "_count") && !strings.HasSuffix(name, "_sum") &&
			!bytes.Contains(readme, []byte("| `"+name+"` |")) {
			t.Errorf("README.md has no row for %s", name)
		}
	}
}

// TestAlertRules checks alerts.yml and runs its unit tests with promtool,
// when it is installed (Debian: apt-get install prometheus).
func TestAlertRules(t *testing.T) {
	promtool := needPromtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestDashboard checks that dashboard.json is a dashboard whose queries
// parse: each becomes a recording rule that promtool checks, when it is
// installed.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("not a dashboard: %+v", dash)
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			expr := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*").Replace(tg.Expr)
			quoted, _ := json.Marshal(expr)
			fmt.Fprintf(&rules, "      - record: dashboard:q%d\n        expr: %s\n", n, quoted)
			n++
		}
	}
	promtool := needPromtool(t)
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries: %v\n%s", err, out)
	}
}

// needPromtool returns the path of promtool (Debian's prometheus package,
// which tools/testenv installs for make test). Without it the test is
// skipped, except in CI, where it fails.
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed: tools/testenv/up installs the prometheus package")
		}
		t.Skip("promtool is not installed (tools/testenv/up installs the prometheus package)")
	}
	return p
}
