package backendtest

import (
	"fmt"
	"maps"

	simba "github.com/simba-go/simba/core"
)

// costLeases is how many leases the heavy session of the keep-alive cost
// check holds.
const costLeases = 2000

// testKeepAliveCost: when nothing changed, a keep-alive of a session
// holding costLeases leases costs the server about what it costs for one
// lease (at most twice as much), by the server's own count of its work
// (Harness.KeepAliveCost), not by time, so that the load of the machine
// does not matter. Each cost is the least of three keep-alives, after one
// that warms up. Skipped without Harness.KeepAliveCost.
func testKeepAliveCost(e *env) {
	if e.h.KeepAliveCost == nil {
		e.t.Skip("the harness sets no KeepAliveCost")
	}
	b, work := e.h.KeepAliveCost(e.t)
	cost := func(leases int) int64 {
		e.t.Helper()
		s := e.openLong(b)
		for i := range leases {
			s.win(e.name(fmt.Sprintf("s%d-%d", leases, i)))
		}
		// The engine's steady keep-alive: what it holds, nothing unsure.
		steady := simba.KeepAliveRequest{Lease: s.lease, Held: maps.Clone(s.held), Generation: s.gen}
		if r := s.keepAliveWith(steady); len(r.Lost) != 0 {
			e.t.Fatalf("a keep-alive with %d leases held reported %d lost", leases, len(r.Lost))
		}
		best := int64(-1)
		for range 3 {
			before := work(e.t)
			s.keepAliveWith(steady)
			if n := work(e.t) - before; best < 0 || n < best {
				best = n
			}
		}
		return best
	}
	one, many := cost(1), cost(costLeases)
	e.t.Logf("server work per keep-alive: %d with 1 lease held, %d with %d", one, many, costLeases)
	if many > 2*max(one, 1) {
		e.t.Fatalf("a keep-alive cost the server %d with %d leases held, %d with 1: want at most twice as much", many, costLeases, one)
	}
}
