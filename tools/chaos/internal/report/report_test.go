package report_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/report"
	"github.com/simba-go/simba/tools/chaos/internal/suite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func outcomes() []*suite.Outcome {
	return []*suite.Outcome{{Backend: "redis", Result: &check.Result{Rows: []*check.Row{
		{Fault: "none", Handovers: 10},
		{Fault: suite.SigKill, Injections: 2, Handovers: 5, Failovers: []time.Duration{800 * time.Millisecond, 1200 * time.Millisecond}},
		{Fault: suite.Evict, Injections: 1, Handovers: 3, EvictOverlaps: 1, Refused: 4, Failovers: []time.Duration{100 * time.Millisecond}},
	}}}}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	report.Table(&b, outcomes())
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2+3+1 {
		t.Fatalf("%d lines, want a header, a rule, 3 rows and a total:\n%s", len(lines), b.String())
	}
	for _, want := range []string{
		"| redis | sigkill | 2 | 5 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 2 | 800 / 1200 / 1200 |",
		"| redis | evict | 1 | 3 | 0 | 0 | 1 | 0 | 0 | 0 | 4 | 1 | 100 / 100 / 100 |",
		"| redis | **all** | 3 | 18 | 0 | 0 | 1 | 0 | 0 | 0 | 4 | 3 | 800 / 1200 / 1200 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSVGIsWellFormed(t *testing.T) {
	var b bytes.Buffer
	report.SVG(&b, outcomes(), 1583*time.Millisecond)
	dec := xml.NewDecoder(&b)
	circles := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the SVG is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			circles++
		}
	}
	if circles != 3+2 { // one per failover, two in the legend
		t.Errorf("%d circles, want 5", circles)
	}
}
