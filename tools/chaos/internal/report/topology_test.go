package report_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/report"
	"github.com/simba-go/simba/tools/chaos/internal/suite"
)

func topologyOutcome() *suite.Outcome {
	return &suite.Outcome{Backend: "redis", Topology: "redis-single", Profile: "topology", Duration: 90 * time.Second,
		Result: &check.Result{TokensMayGoBack: true, Rows: []*check.Row{
			{Fault: "none", Terms: 40, Handovers: 30},
			{Fault: "primary-kill", Injections: 2, Terms: 50, Handovers: 20, TokenRegressions: 9, MaxTokenDrop: 57,
				WorkAgain: []time.Duration{2100 * time.Millisecond, 2500 * time.Millisecond},
				Ended:     map[string]int{"released": 12, "DEADLINE_PASSED": 3, "SESSION_EXPIRED": 3}},
			{Fault: suite.SigKill, Injections: 1, Terms: 20, Handovers: 10, Failovers: []time.Duration{900 * time.Millisecond}},
		}}}
}

func TestTopologyTable(t *testing.T) {
	var b bytes.Buffer
	report.TopologyTable(&b, topologyOutcome())
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2+3+1 {
		t.Fatalf("%d lines, want a header, a rule, 3 rows and a total:\n%s", len(lines), b.String())
	}
	for _, want := range []string{
		"| none | 0 | 40 | 30 | 0 | 0 | 0 | - | - | - |",
		"| primary-kill | 2 | 50 | 20 | 0 | 0 | 9 (57) | 2100 / 2500 | - | released 12, DEADLINE_PASSED 3, SESSION_EXPIRED 3 |",
		"| sigkill | 1 | 20 | 10 | 0 | 0 | 0 | - | 900 / 900 | - |",
		"| **all** | 3 | 110 | 60 | 0 | 0 | 9 (57) | 2100 / 2500 | 900 / 900 | released 12, DEADLINE_PASSED 3, SESSION_EXPIRED 3 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestTopologySection(t *testing.T) {
	p := suite.Topology()
	at := time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC)
	s := report.TopologySection(topologyOutcome(), p, at)
	for _, want := range []string{"## Topology `redis-single`", "2026-12-01 23:30 UTC", "loopback", "counted, not failed",
		"No check failed", "| primary-kill | 2 |"} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	o := topologyOutcome()
	o.Result.TokensMayGoBack, o.Result.Violations = false, []string{"lock-0: token 3 of n2 started after token 60 of n1"}
	s = report.TopologySection(o, p, at)
	if !strings.Contains(s, "**1 checks failed**") || !strings.Contains(s, "a regression fails the run") {
		t.Errorf("a failed run's section does not say so:\n%s", s)
	}
	o = topologyOutcome()
	o.Result.Rows[1].Overlaps = 2
	s = report.TopologySection(o, p, at)
	if !strings.Contains(s, "2 overlapping valid terms after a server fault, counted") {
		t.Errorf("a section with overlaps counted says there were none:\n%s", s)
	}
}

func TestSplice(t *testing.T) {
	doc := "# Reliability figures\n\n<!-- begin soak -->\nold soak\n<!-- end soak -->\n"
	doc = report.Splice(doc, "topology a", "table a\n")
	doc = report.Splice(doc, "topology b", "table b")
	doc = report.Splice(doc, "soak", "new soak\n")
	doc = report.Splice(doc, "topology a", "table a2\n")
	want := "# Reliability figures\n\n<!-- begin soak -->\nnew soak\n<!-- end soak -->\n\n" +
		"<!-- begin topology a -->\ntable a2\n<!-- end topology a -->\n\n" +
		"<!-- begin topology b -->\ntable b\n<!-- end topology b -->\n"
	if doc != want {
		t.Errorf("spliced:\n%s\nwant:\n%s", doc, want)
	}
	if got := report.Splice("", "soak", "x"); got != "<!-- begin soak -->\nx\n<!-- end soak -->\n" {
		t.Errorf("into an empty file: %q", got)
	}
}
