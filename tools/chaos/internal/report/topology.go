package report

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/suite"
)

// TopologyTable writes the table of one topology run: a row per fault
// (the topology's, and the node faults mixed in) and a total.
func TopologyTable(w io.Writer, o *suite.Outcome) {
	fmt.Fprintln(w, "| fault | injections | terms | handovers | overlaps | stale writes accepted | token regressions (largest drop) | time to work again median / max (ms) | failover after a node fault p50 / max (ms) | terms ended during the fault, by reason |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|---|---|")
	rows := slices.Clone(o.Result.Rows)
	total := o.Result.Total()
	rows = append(rows, &total)
	for _, r := range rows {
		name := r.Fault
		if name == "all" {
			name = "**all**"
		}
		regressions := fmt.Sprint(r.TokenRegressions)
		if r.TokenRegressions > 0 {
			regressions = fmt.Sprintf("%d (%d)", r.TokenRegressions, r.MaxTokenDrop)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %s | %s | %s | %s |\n", name, r.Injections, r.Terms, r.Handovers,
			r.Overlaps, r.StaleAccepted, regressions, medianMax(r.WorkAgain), medianMax(r.Failovers), reasons(r.Ended))
	}
}

func medianMax(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return ms(check.Percentile(ds, 50)) + " / " + ms(check.Percentile(ds, 100))
}

// reasons lists the counts by reason, most first, then by name.
func reasons(ended map[string]int) string {
	if len(ended) == 0 {
		return "-"
	}
	keys := slices.Collect(maps.Keys(ended))
	slices.SortFunc(keys, func(a, b string) int {
		if ended[a] != ended[b] {
			return ended[b] - ended[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, ended[k])
	}
	return strings.Join(parts, ", ")
}

// TopologySection is the section of docs/reliability.md for one topology
// run: a heading, how it ran, and its table. at is when it ran.
func TopologySection(o *suite.Outcome, p suite.Profile, at time.Time) string {
	var b strings.Builder
	tm := p.Timing()
	fmt.Fprintf(&b, "## Topology `%s`\n\n", o.Topology)
	by := "`make topology` (`tools/chaos`, profile `topology`)"
	if p.Name != "topology" {
		by = fmt.Sprintf("`tools/chaos` with profile `%s` (not `make topology`'s)", p.Name)
	}
	fmt.Fprintf(&b, "Measured by %s on %s UTC, %d cores, loopback,\n", by, at.UTC().Format("2006-01-02 15:04"), runtime.NumCPU())
	fmt.Fprintf(&b, "on a machine shared with other work; the run took %v. %d node processes opened the topology's\n",
		o.Duration.Round(time.Second), p.Nodes)
	fmt.Fprintf(&b, "URL (backend %s) and contended for %d locks and %d election, lease %v (renew %v).\n",
		o.Backend, p.Locks, p.Elections, tm.Lease, tm.Renew.Round(time.Millisecond))
	fmt.Fprintf(&b, "Each fault of the topology was injected at least %d times", p.PerFault)
	if len(p.Faults) > 0 {
		fmt.Fprintf(&b, ", each followed by a node fault (%s in turn)", strings.Join(p.Faults, ", "))
	}
	fmt.Fprintf(&b, ".\n*Time to work again*: from the moment a fault struck to the end of the nodes' first stall\n")
	fmt.Fprintf(&b, "after it (no term started for longer than any gap before the faults), or to the first term when\n")
	fmt.Fprintf(&b, "they never stalled. *Terms ended*: the end records of the terms begun before a fault's end, from\n")
	fmt.Fprintf(&b, "its begin to a lease after its end (see [tools/chaos/README.md](../tools/chaos/README.md#topologies)).\n")
	if o.Result.TokensMayGoBack {
		fmt.Fprintf(&b, "Tokens may go back on this topology, as the backend's documentation says: a promotion loses\n")
		fmt.Fprintf(&b, "the commits the replica had not received, so regressions, and overlaps begun after a server fault,\n")
		fmt.Fprintf(&b, "are counted, not failed.")
	} else {
		fmt.Fprintf(&b, "Tokens must not go back on this topology: a regression fails the run.")
	}
	if n := len(o.Result.Violations); n > 0 {
		fmt.Fprintf(&b, " **%d checks failed** in this run; the first: %s\n", n, o.Result.Violations[0])
	} else if n := o.Result.Total().Overlaps; n > 0 {
		fmt.Fprintf(&b, " No check failed: %d overlapping valid terms after a server fault, counted; no stale write accepted.\n", n)
	} else {
		fmt.Fprintf(&b, " No check failed: no overlapping valid terms, no stale write accepted.\n")
	}
	b.WriteString("\n")
	TopologyTable(&b, o)
	return b.String()
}

// UnbuildableSection is the section of a topology that cannot be built
// from Debian's packages, with the exact error.
func UnbuildableSection(name, reason string, at time.Time) string {
	return fmt.Sprintf("## Topology `%s`\n\nNot run (%s UTC): it cannot be built from Debian's packages:\n\n```\n%s\n```\n",
		name, at.UTC().Format("2006-01-02"), reason)
}

// Splice puts body into doc between the markers of key, replacing what
// was there, or appends the markers and body at the end of doc: each run
// rewrites its own sections of docs/reliability.md and leaves the others.
func Splice(doc, key, body string) string {
	begin, end := "<!-- begin "+key+" -->\n", "<!-- end "+key+" -->\n"
	body = strings.TrimRight(body, "\n") + "\n"
	if i := strings.Index(doc, begin); i >= 0 {
		if j := strings.Index(doc[i:], end); j >= 0 {
			return doc[:i+len(begin)] + body + doc[i+j:]
		}
	}
	if doc != "" && !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimRight(doc, "\n") + "\n\n"
	}
	return doc + begin + body + end
}
