package check_test

import (
	"strings"
	"testing"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/history"
)

// permit is the start of a permit of a semaphore of n permits.
func permit(t int64, node, name string, tok uint64, dl int64, n int) history.Record {
	r := start(t, node, name, tok, dl)
	r.Permits = n
	return r
}

func TestPermits(t *testing.T) {
	// Two permits of sem: a and b hold both, c gets one once a's ended.
	clean := []history.Record{
		permit(1000, "a", "sem:0", 10, 1900, 2), permit(1005, "b", "sem:1", 12, 1900, 2),
		end(1100, "a", "sem:0", 10),
		permit(1110, "c", "sem:0", 13, 2000, 2),
		end(1200, "b", "sem:1", 12), end(1300, "c", "sem:0", 13),
	}
	if res := check.Check(clean, timing); res.Failed() || res.Total().PermitOverlaps != 0 {
		t.Fatalf("a clean semaphore history: %v, %d permit overlaps", res.Violations, res.Total().PermitOverlaps)
	} else if tot := res.Total(); tot.PermitTerms != 3 || tot.MostPermits != 2 {
		t.Fatalf("%d permit terms, at most %d valid at once; want 3 and 2", tot.PermitTerms, tot.MostPermits)
	}
	tests := []struct {
		name string
		give []history.Record
		want string
		row  func(check.Row) int
	}{{
		name: "a third permit of two while both are valid",
		give: []history.Record{
			permit(1000, "a", "sem:0", 10, 1900, 2), permit(1005, "b", "sem:1", 12, 1900, 2),
			permit(1010, "c", "sem:2", 13, 2000, 2),
		},
		want: "began while 2 permits of 2 were valid",
		row:  func(r check.Row) int { return r.PermitOverlaps },
	}, {
		name: "a permit's token below one that ended before it began, on another slot",
		give: []history.Record{
			permit(1000, "a", "sem:0", 10, 1900, 2), end(1100, "a", "sem:0", 10),
			permit(1200, "b", "sem:1", 9, 2100, 2),
		},
		want: "token 9 of b was asked for after permit sem:0 token 10",
		row:  func(r check.Row) int { return r.TokenRegressions },
	}}
	// A permit asked for before a shorter one was granted and ended, and
	// whose reply came late, may carry the lower token.
	late := permit(1200, "b", "sem:1", 9, 2100, 2)
	late.Asked = 1000 * ms
	if res := check.Check([]history.Record{permit(1010, "a", "sem:0", 10, 1900, 2), end(1100, "a", "sem:0", 10), late}, timing); res.Failed() {
		t.Fatalf("a permit whose reply came late: %v", res.Violations)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := check.Check(tc.give, timing)
			if !res.Failed() || !strings.Contains(res.Violations[0], tc.want) {
				t.Fatalf("violations %q, want one with %q", res.Violations, tc.want)
			}
			if got := tc.row(res.Total()); got != 1 {
				t.Fatalf("counted %d, want 1", got)
			}
		})
	}
}
