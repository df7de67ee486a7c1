// Package check reads the histories of a robustness run and finds what a
// correct lease service never shows:
//
//   - two valid terms of one name overlapping in time, where a term is
//     valid from its start record to the earlier of its end record and the
//     latest local deadline the node saw for it;
//   - a token that does not strictly increase from term to term of a name
//     (counted but passed where the topology's documentation allows it,
//     option TokensMayGoBack, and so are overlaps begun after a server
//     fault there);
//   - more valid terms of a semaphore at once than its permits, or a
//     permit whose token is not above that of every permit of the
//     semaphore whose validity ended before it began;
//   - a stale write accepted by the fenced resource (a token below the
//     highest it had accepted for the name);
//   - a write sent after its term's validity ended;
//   - a failover after a crash (SIGKILL) slower than LeaseDuration +
//     RenewInterval/2 + RetryJitter + Slack.
//
// After a fault on the servers (a fault record without a victim node) it
// also measures how long the nodes took to work again and which terms
// ended around the fault, with their reasons.
//
// Every record carries the machine-wide monotonic clock, so the histories
// of separate processes compare directly. The start of a term is recorded
// when the node learnt of it, a little after the backend granted it, and a
// term's validity ends no later than its node believed: both err on the
// side of the system under test only by the time a node takes to write a
// record, far below the margins the checks are about.
package check

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/history"
)

// Timing is the session timing the nodes ran with, for the failover bound.
type Timing struct {
	Lease, Renew, Jitter time.Duration
	// Slack is added to the bound for the time the machine takes to run a
	// woken process (scheduling on a loaded machine, the node's own record).
	Slack time.Duration
	// EvictGrace is how long a node may go on counting on a term after its
	// session was deleted on the server (the "evict" fault): until its next
	// keep-alive: sent at most a renew interval after the deletion and
	// answered within another (the engine's deadline for the call), plus
	// Slack.
	EvictGrace time.Duration
}

// Bound is the longest failover after a crash that passes.
func (t Timing) Bound() time.Duration { return t.Lease + t.Renew/2 + t.Jitter + t.Slack }

// None is the phase before the first fault.
const None = "none"

// CrashFaults are the faults whose failovers are held to Timing.Bound.
var CrashFaults = map[string]bool{"sigkill": true}

// NodeFaults are the faults aimed at one node, whose failover is measured.
var NodeFaults = map[string]bool{"sigkill": true, "sigstop": true, "blackhole": true, "expire": true, "evict": true}

// Suite is the node name of the suite's own records (the resource's and
// the faults'): a fault recorded without a victim carries it, and hits the
// servers rather than a node.
const Suite = "suite"

// Evict is the fault after which a bounded overlap is the documented
// behaviour rather than a violation.
const Evict = "evict"

// Row sums up one fault of one run.
type Row struct {
	Fault            string
	Injections       int
	Terms            int
	Handovers        int // terms won by another node than the previous term of the name
	Overlaps         int
	PermitOverlaps   int // a permit begun while its semaphore's permits were all valid
	PermitTerms      int // terms that were permits of a semaphore
	MostPermits      int // the most permits of one semaphore valid at once
	EvictOverlaps    int // overlaps of an evicted session's term, within Timing.EvictGrace
	TokenRegressions int
	StaleAccepted    int
	LateWrites       int
	SlowFailovers    int
	Writes           int
	Refused          int // stale writes the resource refused, as it should
	Failovers        []time.Duration
	// MaxTokenDrop is the most a token went back: the previous term's
	// token minus the regressing one's, at most.
	MaxTokenDrop uint64
	// WorkAgain holds, for each injection of a fault on the servers, the
	// time from the moment it struck (its begin record, or its strike
	// record where the topology tells that moment) to the end of the
	// first stall of the nodes that begins within a lease of it: a gap
	// between two term starts (of any names) longer than every gap before
	// the first fault. Without a stall, to the first term after it.
	WorkAgain []time.Duration
	// Ended counts, by reason, the terms that began before the end of a
	// fault on the servers and ended (their end records) from its begin to
	// a lease after its end.
	Ended map[string]int
}

// Result is the outcome of one run.
type Result struct {
	Rows       []*Row // in the order the faults were first injected, None first
	Violations []string
	// TokensMayGoBack says that token regressions, and overlaps begun
	// after a server fault, were counted, not failed (option
	// TokensMayGoBack).
	TokensMayGoBack bool
}

// Option changes what Check counts as a failure.
type Option func(*Result)

// TokensMayGoBack counts token regressions without failing on them: for a
// topology whose documentation says a token can go back (asynchronous
// replication without the durable option). Such a topology loses the
// commits a promoted replica had not received, acquires included: the new
// primary can hand a name out again while its holder still believes in
// its term, until the holder's next keep-alive reply. So an overlap whose
// later term began after a server fault is counted without failing too.
// An overlap before any fault, and a stale write accepted, still fail.
func TokensMayGoBack(r *Result) { r.TokensMayGoBack = true }

// Total sums the rows.
func (r *Result) Total() Row {
	var t Row
	t.Fault = "all"
	for _, x := range r.Rows {
		t.Injections += x.Injections
		t.Terms += x.Terms
		t.Handovers += x.Handovers
		t.Overlaps += x.Overlaps
		t.PermitOverlaps += x.PermitOverlaps
		t.PermitTerms += x.PermitTerms
		t.MostPermits = max(t.MostPermits, x.MostPermits)
		t.EvictOverlaps += x.EvictOverlaps
		t.TokenRegressions += x.TokenRegressions
		t.StaleAccepted += x.StaleAccepted
		t.LateWrites += x.LateWrites
		t.SlowFailovers += x.SlowFailovers
		t.Writes += x.Writes
		t.Refused += x.Refused
		t.Failovers = append(t.Failovers, x.Failovers...)
		t.MaxTokenDrop = max(t.MaxTokenDrop, x.MaxTokenDrop)
		t.WorkAgain = append(t.WorkAgain, x.WorkAgain...)
		for reason, n := range x.Ended {
			if t.Ended == nil {
				t.Ended = map[string]int{}
			}
			t.Ended[reason] += n
		}
	}
	return t
}

// Failed reports whether any check failed.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

type termKey struct {
	node, name string
	token      uint64
}

type term struct {
	termKey
	start    int64
	end      int64 // math.MaxInt64 without an end record
	deadline int64 // the latest local deadline seen
	reason   string
	permits  int   // a semaphore's permit: the semaphore's number of permits; else 0
	asked    int64 // a permit: when its Acquire call began (it was granted from then to start)
}

// validEnd is the end of the term's validity.
func (t *term) validEnd() int64 { return min(t.end, t.deadline) }

type fault struct {
	t      int64
	end    int64 // the end record's time; math.MaxInt64 without one
	strike int64 // when the fault struck, if the topology said (a "strike" record); else t
	kind   string
	victim string
}

// maxViolations bounds the violations listed; the counts stay exact.
const maxViolations = 50

// Check runs every check over the records of one run: the nodes', the
// resource's and the faults' records, in any order.
func Check(recs []history.Record, tm Timing, opts ...Option) *Result {
	res := &Result{}
	for _, o := range opts {
		o(res)
	}
	// A node's token of a name identifies its term, but where tokens go
	// back the same node can win the same token of a name twice: the
	// records are read in time order, and a start after the end of the
	// term of its key begins another term.
	recs = slices.Clone(recs)
	slices.SortStableFunc(recs, func(a, b history.Record) int { return compareInt(a.T, b.T) })
	var terms []*term
	cur := map[termKey]*term{}   // the latest term of each key so far
	first := map[termKey]*term{} // for a write recorded before its term's start
	var writes []history.Record
	var writeTerms []*term // the term of each write, nil for none
	var fences []history.Record
	var faults []fault
	var faultEnds []history.Record
	for _, r := range recs {
		k := termKey{r.Node, r.Name, r.Token}
		switch r.Kind {
		case history.KindStart:
			t := cur[k]
			if t == nil || t.end <= r.T {
				t = &term{termKey: k, start: r.T, end: math.MaxInt64}
				terms = append(terms, t)
				cur[k] = t
				if first[k] == nil {
					first[k] = t
				}
			}
			t.start = min(t.start, r.T)
			t.deadline = max(t.deadline, r.Deadline)
			t.permits = max(t.permits, r.Permits)
			if r.Asked > 0 && (t.asked == 0 || r.Asked < t.asked) {
				t.asked = r.Asked
			}
		case history.KindWrite:
			writes = append(writes, r)
			writeTerms = append(writeTerms, cur[k])
			if t := cur[k]; t != nil {
				t.deadline = max(t.deadline, r.Deadline)
			}
		case history.KindEnd:
			if t := cur[k]; t != nil && r.T < t.end {
				t.end, t.reason = r.T, r.Reason
			}
		case history.KindFence:
			fences = append(fences, r)
		case history.KindFault:
			switch r.Phase {
			case "begin":
				faults = append(faults, fault{t: r.T, end: math.MaxInt64, strike: r.T, kind: r.Fault, victim: r.Node})
			case "end", "strike":
				faultEnds = append(faultEnds, r)
			}
		}
	}
	// A write recorded before its term's start (a node never does) counts
	// under the first term of its key.
	for i, w := range writes {
		if t := first[termKey{w.Node, w.Name, w.Token}]; writeTerms[i] == nil && t != nil {
			writeTerms[i] = t
			t.deadline = max(t.deadline, w.Deadline)
		}
	}
	sort.Slice(faults, func(i, j int) bool { return faults[i].t < faults[j].t })
	pairEnds(faults, faultEnds)

	rows := map[string]*Row{}
	row := func(kind string) *Row {
		if rows[kind] == nil {
			rows[kind] = &Row{Fault: kind}
			res.Rows = append(res.Rows, rows[kind])
		}
		return rows[kind]
	}
	row(None)
	for _, f := range faults {
		row(f.kind).Injections++
	}
	// lastFault is the last fault injected at or before t, nil before the
	// first.
	lastFault := func(t int64) *fault {
		i := sort.Search(len(faults), func(i int) bool { return faults[i].t > t })
		if i == 0 {
			return nil
		}
		return &faults[i-1]
	}
	phase := func(t int64) *Row {
		if f := lastFault(t); f != nil {
			return row(f.kind)
		}
		return row(None)
	}
	violate := func(format string, args ...any) {
		if len(res.Violations) < maxViolations {
			res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
		}
	}

	byName := map[string][]*term{}
	for _, t := range terms {
		byName[t.name] = append(byName[t.name], t)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		ts := byName[name]
		sort.Slice(ts, func(i, j int) bool { return ts[i].start < ts[j].start })
		var open *term // the earlier term whose validity ends last
		for i, t := range ts {
			p := phase(t.start)
			p.Terms++
			if i > 0 {
				prev := ts[i-1]
				if prev.node != t.node {
					p.Handovers++
				}
				if t.token <= prev.token {
					p.TokenRegressions++
					p.MaxTokenDrop = max(p.MaxTokenDrop, prev.token-t.token)
					if !res.TokensMayGoBack {
						violate("%s: token %d of %s started after token %d of %s", name, t.token, t.node, prev.token, prev.node)
					}
				}
			}
			switch {
			case open == nil || t.start >= open.validEnd():
			case evicted(faults, open, t, tm.EvictGrace):
				p.EvictOverlaps++
			default:
				p.Overlaps++
				if f := lastFault(t.start); res.TokensMayGoBack && f != nil && f.victim == Suite {
					break
				}
				violate("%s: token %d of %s started %v before token %d of %s stopped being valid (ended %s)",
					name, t.token, t.node, time.Duration(open.validEnd()-t.start), open.token, open.node, open.reason)
			}
			if open == nil || t.validEnd() > open.validEnd() {
				open = t
			}
		}
	}

	checkPermits(terms, faults, tm, res, phase, violate)

	for i, w := range writes {
		p := phase(w.T)
		p.Writes++
		t := writeTerms[i]
		if t == nil {
			p.LateWrites++
			violate("%s: %s wrote with token %d of no term it recorded", w.Name, w.Node, w.Token)
			continue
		}
		if w.T >= t.validEnd() {
			p.LateWrites++
			violate("%s: %s wrote with token %d %v after its term stopped being valid",
				w.Name, w.Node, w.Token, time.Duration(w.T-t.validEnd()))
		}
	}

	slices.SortStableFunc(fences, func(a, b history.Record) int { return compareInt(a.T, b.T) })
	highest := map[string]uint64{}
	for _, f := range fences {
		p := phase(f.T)
		if !f.OK {
			p.Refused++
			continue
		}
		if f.Token < highest[f.Name] {
			p.StaleAccepted++
			violate("%s: the resource accepted token %d of %s after token %d", f.Name, f.Token, f.Node, highest[f.Name])
		}
		highest[f.Name] = max(highest[f.Name], f.Token)
	}

	serverFaults(faults, terms, tm, row)

	for _, f := range faults {
		if !NodeFaults[f.kind] {
			continue
		}
		for _, name := range names {
			d, ok := failover(byName[name], f)
			if !ok {
				continue
			}
			r := row(f.kind)
			r.Failovers = append(r.Failovers, d)
			if CrashFaults[f.kind] && d > tm.Bound() {
				r.SlowFailovers++
				violate("%s: failover after %s of %s took %v, bound %v", name, f.kind, f.victim, d, tm.Bound())
			}
		}
	}
	return res
}

// pairEnds gives each fault (sorted by begin) the first end record, and
// strike record, of its kind at or after its begin that no earlier fault
// took (faults are injected one at a time).
func pairEnds(faults []fault, ends []history.Record) {
	slices.SortStableFunc(ends, func(a, b history.Record) int { return compareInt(a.T, b.T) })
	used := make([]bool, len(ends))
	for _, phase := range []string{"end", "strike"} {
		for i := range faults {
			f := &faults[i]
			for j, e := range ends {
				if !used[j] && e.Phase == phase && e.Fault == f.kind && e.T >= f.t {
					used[j] = true
					if phase == "end" {
						f.end = e.T
					} else {
						f.strike = e.T
					}
					break
				}
			}
		}
	}
}

// serverFaults measures, for each fault on the servers (no victim node:
// recorded under Suite), the time to work again (workAgain) and the
// reasons of the terms that began before its end and ended from its begin
// to a lease after its end (a term hit by the fault has ended by then;
// the terms begun after the fault are left out).
func serverFaults(faults []fault, terms []*term, tm Timing, row func(string) *Row) {
	starts := make([]int64, 0, len(terms))
	for _, t := range terms {
		starts = append(starts, t.start)
	}
	slices.Sort(starts)
	// The longest gap between two term starts before the first fault: a
	// longer one after a fault is a stall.
	var ordinary int64
	for i := 1; i < len(starts) && len(faults) > 0 && starts[i] < faults[0].t; i++ {
		ordinary = max(ordinary, starts[i]-starts[i-1])
	}
	for _, f := range faults {
		if f.victim != "" && f.victim != Suite {
			continue
		}
		r := row(f.kind)
		if d, ok := workAgain(starts, f.strike, ordinary, int64(tm.Lease)); ok {
			r.WorkAgain = append(r.WorkAgain, d)
		}
		until := f.end
		if until != math.MaxInt64 {
			until += int64(tm.Lease)
		}
		for _, t := range terms {
			if t.end != math.MaxInt64 && t.end >= f.t && t.end <= until && t.start <= f.end {
				if r.Ended == nil {
					r.Ended = map[string]int{}
				}
				r.Ended[t.reason]++
			}
		}
	}
}

// workAgain is the time from strike to the end of the first stall (a gap
// between consecutive term starts longer than ordinary) that begins
// within horizon of strike: the outage of a kill begins there, whatever
// the terms the old servers still granted while the fault was being set
// up. Without such a stall the nodes never stopped, and it is the time to
// the first term started after strike. It is false without a term after
// strike.
func workAgain(starts []int64, strike, ordinary, horizon int64) (time.Duration, bool) {
	i := sort.Search(len(starts), func(i int) bool { return starts[i] > strike })
	if i == len(starts) {
		return 0, false
	}
	prev := strike
	for _, s := range starts[i:] {
		if prev > strike+horizon {
			break
		}
		if s-prev > ordinary {
			return time.Duration(s - strike), true
		}
		prev = s
	}
	return time.Duration(starts[i] - strike), true
}

// evicted reports whether the overlap of earlier by later follows an
// eviction of earlier's node within grace: the session was deleted after
// later began (earlier may have won its term just before, and learnt of
// it just after), and earlier stopped counting on its
// term within grace of the deletion. The deletion is done by the fault's
// end record (its begin when it has none): on a loaded machine the two
// can lie most of a second apart, and a term won between them is counted
// on until the keep-alive after the deletion.
func evicted(faults []fault, earlier, later *term, grace time.Duration) bool {
	for _, f := range faults {
		deleted := f.t
		if f.end != math.MaxInt64 && f.end > deleted {
			deleted = f.end
		}
		if f.kind == Evict && f.victim == earlier.node && f.t <= later.start &&
			earlier.validEnd() <= deleted+int64(grace) {
			return true
		}
	}
	return false
}

// failover returns how long after fault f another node started a term of
// the name, when f's victim held a valid term of it when f struck.
func failover(ts []*term, f fault) (time.Duration, bool) {
	held := false
	for _, t := range ts {
		if t.node == f.victim && t.start <= f.t && f.t < t.validEnd() {
			held = true
			break
		}
	}
	if !held {
		return 0, false
	}
	for _, t := range ts { // sorted by start
		if t.start > f.t && t.node != f.victim {
			return time.Duration(t.start - f.t), true
		}
	}
	return 0, false
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Percentile returns the p-th percentile (0..100) of ds by the
// nearest-rank method, or 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
