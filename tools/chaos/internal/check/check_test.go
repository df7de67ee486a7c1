package check_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/history"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var timing = check.Timing{Lease: time.Second, Renew: 333 * time.Millisecond, Jitter: 166 * time.Millisecond,
	Slack: 250 * time.Millisecond, EvictGrace: 583 * time.Millisecond}

const ms = int64(time.Millisecond)

func start(t int64, node, name string, tok uint64, dl int64) history.Record {
	return history.Record{T: t * ms, Kind: history.KindStart, Node: node, Name: name, Token: tok, Deadline: dl * ms}
}

func end(t int64, node, name string, tok uint64) history.Record {
	return history.Record{T: t * ms, Kind: history.KindEnd, Node: node, Name: name, Token: tok, Reason: "released"}
}

func write(t int64, node, name string, tok uint64, dl int64) history.Record {
	return history.Record{T: t * ms, Kind: history.KindWrite, Node: node, Name: name, Token: tok, Deadline: dl * ms}
}

func fenced(t int64, node, name string, tok uint64, ok bool) history.Record {
	return history.Record{T: t * ms, Kind: history.KindFence, Node: node, Name: name, Token: tok, OK: ok}
}

func fault(t int64, kind, victim string) history.Record {
	return history.Record{T: t * ms, Kind: history.KindFault, Fault: kind, Node: victim, Phase: "begin"}
}

// clean is a history that passes: a handover by release, a crash with a
// failover within the bound, a paused holder whose write was refused.
func clean() []history.Record {
	return []history.Record{
		start(1000, "a", "x", 1, 1900), write(1010, "a", "x", 1, 1900), fenced(1011, "a", "x", 1, true),
		end(1020, "a", "x", 1),
		start(1030, "b", "x", 2, 1950), write(1040, "b", "x", 2, 1960), fenced(1041, "b", "x", 2, true),
		fault(1100, "sigkill", "b"),
		start(2300, "c", "x", 5, 3200), write(2310, "c", "x", 5, 3210), fenced(2311, "c", "x", 5, true),
		// a writes late, paused: its term had ended; the resource refuses.
		fenced(2400, "a", "x", 1, false),
		end(2500, "c", "x", 5),
	}
}

func TestCleanHistoryPasses(t *testing.T) {
	res := check.Check(clean(), timing)
	if res.Failed() {
		t.Fatalf("violations in a clean history: %v", res.Violations)
	}
	total := res.Total()
	if total.Handovers != 2 || total.Terms != 3 || total.Refused != 1 || len(total.Failovers) != 1 {
		t.Errorf("handovers %d terms %d refused %d failovers %v, want 2, 3, 1 and one", total.Handovers, total.Terms,
			total.Refused, total.Failovers)
	}
	if got := total.Failovers[0]; got != 1200*time.Millisecond {
		t.Errorf("failover = %v, want 1.2s", got)
	}
}

func TestBrokenHistoriesFail(t *testing.T) {
	tests := []struct {
		name string
		give []history.Record
		want string // in the first violation
		row  func(check.Row) int
	}{
		{
			name: "overlap: a term begins before the previous one's deadline (no margin)",
			give: []history.Record{
				start(1000, "a", "x", 1, 2500), write(1100, "a", "x", 1, 2500),
				start(2000, "b", "x", 2, 3000),
			},
			want: "before token 1 of a stopped being valid",
			row:  func(r check.Row) int { return r.Overlaps },
		},
		{
			name: "overlap: a revived session keeps its term past the eviction grace",
			give: []history.Record{
				start(1000, "a", "x", 1, 1900), fault(1200, "evict", "a"), write(1800, "a", "x", 1, 2700),
				start(1250, "b", "x", 2, 2200),
			},
			want: "stopped being valid",
			row:  func(r check.Row) int { return r.Overlaps },
		},
		{
			name: "token regression",
			give: []history.Record{
				start(1000, "a", "x", 5, 1500), end(1400, "a", "x", 5),
				start(1600, "b", "x", 4, 2500),
			},
			want: "token 4 of b started after token 5 of a",
			row:  func(r check.Row) int { return r.TokenRegressions },
		},
		{
			name: "equal tokens are a regression too",
			give: []history.Record{
				start(1000, "a", "x", 5, 1500), end(1400, "a", "x", 5),
				start(1600, "b", "x", 5, 2500),
			},
			want: "token 5 of b started after token 5 of a",
			row:  func(r check.Row) int { return r.TokenRegressions },
		},
		{
			name: "stale write accepted (a release or resource that ignores the token)",
			give: []history.Record{
				fenced(1000, "b", "x", 7, true), fenced(1100, "a", "x", 6, true),
			},
			want: "accepted token 6 of a after token 7",
			row:  func(r check.Row) int { return r.StaleAccepted },
		},
		{
			name: "write after the term's deadline",
			give: []history.Record{
				start(1000, "a", "x", 1, 1900), write(1950, "a", "x", 1, 1900),
			},
			want: "after its term stopped being valid",
			row:  func(r check.Row) int { return r.LateWrites },
		},
		{
			name: "write after the term's end record",
			give: []history.Record{
				start(1000, "a", "x", 1, 1900), end(1100, "a", "x", 1), write(1200, "a", "x", 1, 1900),
			},
			want: "after its term stopped being valid",
			row:  func(r check.Row) int { return r.LateWrites },
		},
		{
			name: "write under a term never recorded",
			give: []history.Record{write(1200, "a", "x", 9, 1900)},
			want: "of no term it recorded",
			row:  func(r check.Row) int { return r.LateWrites },
		},
		{
			name: "slow failover after a crash",
			give: []history.Record{
				start(1000, "a", "x", 1, 1900), fault(1100, "sigkill", "a"),
				start(1100+1800, "b", "x", 2, 4000),
			},
			want: "failover after sigkill of a took 1.8s",
			row:  func(r check.Row) int { return r.SlowFailovers },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := check.Check(tt.give, timing)
			if !res.Failed() {
				t.Fatal("the check passed a broken history")
			}
			if !strings.Contains(res.Violations[0], tt.want) {
				t.Errorf("violation %q, want it to say %q", res.Violations[0], tt.want)
			}
			if n := tt.row(res.Total()); n != 1 {
				t.Errorf("count = %d, want 1", n)
			}
		})
	}
}

func TestEvictionWithinGraceIsCountedApart(t *testing.T) {
	give := []history.Record{
		start(1000, "a", "x", 1, 1900), fault(1200, "evict", "a"), write(1210, "a", "x", 1, 1900),
		end(1300, "a", "x", 1), start(1250, "b", "x", 2, 2200),
	}
	res := check.Check(give, timing)
	if res.Failed() {
		t.Fatalf("violations: %v", res.Violations)
	}
	if r := res.Total(); r.EvictOverlaps != 1 || r.Overlaps != 0 {
		t.Errorf("evict overlaps %d, overlaps %d, want 1 and 0", r.EvictOverlaps, r.Overlaps)
	}
}

func faultEnd(t int64, kind, victim string) history.Record {
	return history.Record{T: t * ms, Kind: history.KindFault, Fault: kind, Node: victim, Phase: "end"}
}

func ended(t int64, node, name string, tok uint64, reason string) history.Record {
	r := end(t, node, name, tok)
	r.Reason = reason
	return r
}

// regressed is a history whose tokens go back after a primary lost its
// data: no overlap, no stale write accepted.
func regressed() []history.Record {
	return []history.Record{
		start(1000, "a", "x", 40, 1900), end(1100, "a", "x", 40),
		fault(1200, "primary-kill", ""),
		start(2500, "b", "x", 3, 3400), write(2510, "b", "x", 3, 3400), fenced(2511, "b", "x", 3, false),
		end(2600, "b", "x", 3),
		start(2700, "a", "x", 45, 3600), end(2800, "a", "x", 45),
		start(2900, "c", "x", 44, 3800), end(3000, "c", "x", 44),
	}
}

func TestTokenRegressionsFailUnlessTheyMayGoBack(t *testing.T) {
	if res := check.Check(regressed(), timing); !res.Failed() || res.Total().TokenRegressions != 2 {
		t.Fatalf("regressions %d, violations %v: want 2 regressions failing the check",
			res.Total().TokenRegressions, res.Violations)
	}
	res := check.Check(regressed(), timing, check.TokensMayGoBack)
	if res.Failed() {
		t.Fatalf("violations where tokens may go back: %v", res.Violations)
	}
	r := res.Total()
	if r.TokenRegressions != 2 || r.MaxTokenDrop != 37 || !res.TokensMayGoBack {
		t.Errorf("regressions %d, max drop %d, flag %v; want 2, 37 (40 to 3) and set", r.TokenRegressions,
			r.MaxTokenDrop, res.TokensMayGoBack)
	}
}

// TestTheSameTokenWonTwiceIsTwoTerms: where tokens go back, a node can win
// a token of a name it won before the data was lost; its writes belong to
// its new term, not to the old one, ended long ago.
func TestTheSameTokenWonTwiceIsTwoTerms(t *testing.T) {
	give := []history.Record{
		start(1000, "a", "x", 2, 1900), write(1010, "a", "x", 2, 1900), end(1100, "a", "x", 2),
		start(1200, "b", "x", 3, 2100), end(1300, "b", "x", 3),
		fault(1400, "primary-kill", ""),
		start(4000, "a", "x", 2, 4900), write(4010, "a", "x", 2, 4900), end(4100, "a", "x", 2),
	}
	res := check.Check(give, timing, check.TokensMayGoBack)
	if res.Failed() {
		t.Fatalf("violations: %v", res.Violations)
	}
	if r := res.Total(); r.Terms != 3 || r.TokenRegressions != 1 || r.MaxTokenDrop != 1 || r.LateWrites != 0 {
		t.Errorf("terms %d, regressions %d, drop %d, late writes %d; want 3, 1, 1, 0", r.Terms, r.TokenRegressions,
			r.MaxTokenDrop, r.LateWrites)
	}
}

func TestServerFaultsMeasureWorkAgainAndEndedTerms(t *testing.T) {
	give := []history.Record{
		start(1000, "a", "x", 1, 1900), start(1010, "b", "y", 1, 1900),
		fault(1100, "primary-kill", check.Suite),
		// the holders learn their terms are gone, during and after the
		// fault; one more ends past the window (end + lease).
		ended(1300, "a", "x", 1, "DEADLINE_PASSED"), ended(1500, "b", "y", 1, "SESSION_EXPIRED"),
		faultEnd(1600, "primary-kill", check.Suite),
		start(1400, "c", "w", 7, 2300), ended(1450, "c", "w", 7, "released"),
		start(2400, "c", "x", 2, 3300), ended(2500, "c", "x", 2, "released"),
		ended(2700, "c", "z", 9, "released"), start(2000, "c", "z", 9, 2900),
		// a node fault is not a server fault: no work-again figure.
		fault(4000, "sigkill", "c"),
		start(5000, "a", "x", 3, 5900),
	}
	res := check.Check(give, timing)
	if res.Failed() {
		t.Fatalf("violations: %v", res.Violations)
	}
	var pk, sk *check.Row
	for _, r := range res.Rows {
		switch r.Fault {
		case "primary-kill":
			pk = r
		case "sigkill":
			sk = r
		}
	}
	if pk == nil || sk == nil {
		t.Fatalf("rows %v lack primary-kill or sigkill", res.Rows)
	}
	// The first term after the fault began at 1400 (w), 300ms after it.
	if len(pk.WorkAgain) != 1 || pk.WorkAgain[0] != 300*time.Millisecond {
		t.Errorf("work again %v, want [300ms]", pk.WorkAgain)
	}
	// w ended during the fault; x and z began after it (2700 is past
	// 1600 + 1s anyway).
	want := map[string]int{"DEADLINE_PASSED": 1, "SESSION_EXPIRED": 1, "released": 1}
	if !maps.Equal(pk.Ended, want) {
		t.Errorf("ended %v, want %v", pk.Ended, want)
	}
	if len(sk.WorkAgain) != 0 || len(sk.Ended) != 0 {
		t.Errorf("a node fault measured as a server fault: %v %v", sk.WorkAgain, sk.Ended)
	}
	if tot := res.Total(); !maps.Equal(tot.Ended, want) || len(tot.WorkAgain) != 1 {
		t.Errorf("total ended %v, work again %v", tot.Ended, tot.WorkAgain)
	}
}

func TestWorkAgainCountsFromTheStrike(t *testing.T) {
	strike := faultEnd(1500, "primary-kill", check.Suite)
	strike.Phase = "strike"
	give := []history.Record{
		fault(1100, "primary-kill", check.Suite),
		// a term won on the old primary before the kill struck
		start(1200, "a", "x", 1, 2100), ended(1250, "a", "x", 1, "released"),
		faultEnd(2000, "primary-kill", check.Suite), strike,
		start(1900, "b", "x", 2, 2800),
	}
	res := check.Check(give, timing)
	if got := res.Total().WorkAgain; len(got) != 1 || got[0] != 400*time.Millisecond {
		t.Errorf("work again %v, want [400ms] (from the strike at 1500 to the term at 1900)", got)
	}
}

// TestWorkAgainSkipsTermsBeforeTheStall: an Inject that kills through a
// script strikes some time after the fault's begin, and terms go on
// starting on the old primary meanwhile; the nodes work again at the end
// of the stall that follows, not at the first of those terms.
func TestWorkAgainSkipsTermsBeforeTheStall(t *testing.T) {
	var give []history.Record
	tok := uint64(0)
	term := func(at int64, name string) {
		tok++
		give = append(give, start(at, "a", name, tok, at+900), ended(at+5, "a", name, tok, "released"))
	}
	for at := int64(1000); at < 2000; at += 20 { // the clean phase: a term every 20ms at most
		term(at, "x")
	}
	give = append(give, fault(2000, "replica-promote", check.Suite))
	term(2010, "y") // on the old primary, before the kill lands at about 2030
	term(2025, "y")
	term(2330, "y") // the new primary: 300ms of stall
	for at := int64(2345); at < 3000; at += 15 {
		term(at, "y")
	}
	give = append(give, faultEnd(3000, "replica-promote", check.Suite))
	// a later fault with no stall at all: the nodes never stopped
	give = append(give, fault(5000, "follower-kill", check.Suite))
	for at := int64(5004); at < 6000; at += 15 {
		term(at, "z")
	}
	give = append(give, faultEnd(5900, "follower-kill", check.Suite))
	res := check.Check(give, timing)
	if res.Failed() {
		t.Fatalf("violations: %v", res.Violations)
	}
	want := map[string]time.Duration{"replica-promote": 330 * time.Millisecond, "follower-kill": 4 * time.Millisecond}
	for _, r := range res.Rows {
		if w, ok := want[r.Fault]; ok && (len(r.WorkAgain) != 1 || r.WorkAgain[0] != w) {
			t.Errorf("%s: work again %v, want [%v]", r.Fault, r.WorkAgain, w)
		}
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tt := range []struct {
		give float64
		want time.Duration
	}{{0, 1}, {50, 3}, {99, 5}, {100, 5}} {
		if got := check.Percentile(ds, tt.give); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.give, got, tt.want)
		}
	}
	if got := check.Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile of none = %v, want 0", got)
	}
}

// TestLostCommitsOverlapOnlyAfterAFault: where a promotion loses commits
// (tokens may go back), a name the new primary hands out again can overlap
// the term its holder still believes in until its next keep-alive. Such
// an overlap, begun after a server fault, is counted and passes; the same
// overlap before any fault still fails, as it does on every topology.
func TestLostCommitsOverlapOnlyAfterAFault(t *testing.T) {
	afterFault := []history.Record{
		start(1000, "a", "x", 1, 1900), end(1100, "a", "x", 1),
		start(1200, "a", "x", 2, 2200),
		fault(1300, "replica-promote", check.Suite),
		// the promotion lost a's acquire of token 2: b wins token 2 again
		// while a's term is still valid locally, until a's keep-alive.
		start(1400, "b", "x", 2, 2400), ended(1500, "a", "x", 2, "TAKEN_OVER"), end(1600, "b", "x", 2),
	}
	res := check.Check(afterFault, timing, check.TokensMayGoBack)
	if res.Failed() {
		t.Fatalf("violations where commits may be lost: %v", res.Violations)
	}
	if r := res.Total(); r.Overlaps != 1 || r.TokenRegressions != 1 {
		t.Errorf("overlaps %d, regressions %d; want 1 and 1 counted", r.Overlaps, r.TokenRegressions)
	}
	if res := check.Check(afterFault, timing); !res.Failed() {
		t.Errorf("the overlap passed on a topology that keeps its commits")
	}
	beforeFault := []history.Record{
		start(1000, "a", "x", 1, 1900), start(1400, "b", "x", 2, 2400),
		fault(3000, "replica-promote", check.Suite),
	}
	if res := check.Check(beforeFault, timing, check.TokensMayGoBack); !res.Failed() || res.Total().Overlaps != 1 {
		t.Errorf("an overlap before any fault: violations %v, overlaps %d; want it to fail", res.Violations, res.Total().Overlaps)
	}
	afterNodeFault := []history.Record{
		fault(900, "sigkill", "c"),
		start(1000, "a", "x", 1, 1900), start(1400, "b", "x", 2, 2400),
	}
	if res := check.Check(afterNodeFault, timing, check.TokensMayGoBack); !res.Failed() {
		t.Errorf("an overlap after a node's fault passed: a killed node loses no commit")
	}
}
