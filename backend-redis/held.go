package simbaredis

import (
	"maps"
	"slices"
	"sync"

	simba "github.com/simba-go/simba/core"
)

// heldChecks picks the names of a keep-alive's Held that it checks: all of
// them up to simba.MinLeaseChecks, and otherwise simba.MinLeaseChecks of
// them, the next ones in turn, so that a keep-alive costs the same at any
// number of leases and every lease is checked within
// len(Held)/MinLeaseChecks keep-alives while Held stays the same. What it
// keeps per session is derived from Held alone: the names in one order,
// built again when Generation changes, and where the turn is.
type heldChecks struct {
	mu    sync.Mutex
	turns map[string]*heldTurn
}

type heldTurn struct {
	gen   uint64
	names []string
	next  int
}

// maxHeldTurns bounds the sessions heldChecks remembers: a Backend used
// directly may drop sessions without closing them. Forgetting a turn only
// starts its session's round again.
const maxHeldTurns = 1024

func (h *heldChecks) pick(sid string, req simba.KeepAliveRequest) []string {
	if len(req.Held) <= simba.MinLeaseChecks {
		return slices.Collect(maps.Keys(req.Held))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.turns[sid]
	if t == nil {
		if h.turns == nil || len(h.turns) >= maxHeldTurns {
			h.turns = make(map[string]*heldTurn)
		}
		t = &heldTurn{}
		h.turns[sid] = t
	}
	if t.gen != req.Generation || len(t.names) != len(req.Held) {
		t.reset(req)
	}
	picked, ok := t.take(req.Held)
	if !ok { // another Held under the same Generation
		t.reset(req)
		picked, _ = t.take(req.Held)
	}
	return picked
}

func (t *heldTurn) reset(req simba.KeepAliveRequest) {
	t.gen, t.names = req.Generation, slices.Collect(maps.Keys(req.Held))
}

// take returns the next simba.MinLeaseChecks names in turn, and false when
// one of them is not in held.
func (t *heldTurn) take(held map[string]uint64) ([]string, bool) {
	picked := make([]string, simba.MinLeaseChecks)
	for i := range picked {
		picked[i] = t.names[(t.next+i)%len(t.names)]
		if _, ok := held[picked[i]]; !ok {
			return nil, false
		}
	}
	t.next = (t.next + simba.MinLeaseChecks) % len(t.names)
	return picked, true
}

// forget drops what h keeps of a session that ended.
func (h *heldChecks) forget(sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.turns, sid)
}
