package sqlcore

import (
	"maps"
	"slices"
	"sync"

	simba "github.com/simba-go/simba/core"
)

// The session row's lease_gen counts the changes to the leases the session
// owns: every acquire it wins and every release that frees one of its
// leases adds one, in the statement that changes the lease (PostgreSQL) or
// right after it, before the call returns (MySQL's acquire). The Backend
// keeps, per session it serves, the leases its own calls won and released
// and the generation they add up to. A keep-alive sends that generation;
// the database lists the session's leases only when its own differs, so a
// keep-alive reads one session row (and the group counts) whatever the
// number of leases held, unless something changed that this Backend did
// not see: a call whose reply was lost, a call through another Backend.
//
// Calls of the session still in flight, and replies that wait for an
// earlier one, account for a server generation ahead of the view: the
// keep-alive sends that count (lag) and the database lists the leases
// only when its generation is behind the view or ahead by more. The reply
// then lists the view with the changes already replied: every term the
// engine won before it sent the keep-alive is in it, and a term won after
// is one the engine does not check against this reply.

// unknownGen is the generation of a view that must be read again in full:
// no session row has it.
const unknownGen = -1

// leaseOp is one change reported by an Acquire or Release reply.
type leaseOp struct {
	name    string
	token   uint64
	acquire bool // false: release
}

// leaseView is what one session owns, as far as the replies say.
type leaseView struct {
	gen    int64             // generation leases reflect, unknownGen when unsure
	leases map[string]uint64 // never nil
	shared bool              // leases was handed out in a reply: copy before changing
	ahead  map[int64]leaseOp // changes past gen waiting for the ones before them
	flight int               // Acquire and Release calls in flight
}

// views holds the leaseView of every session a Backend serves.
type views struct {
	mu sync.Mutex
	m  map[simba.SessionID]*leaseView
}

// open starts the view of a new session, which owns nothing (generation 0).
func (v *views) open(s simba.SessionID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[simba.SessionID]*leaseView{}
	}
	v.m[s] = &leaseView{leases: map[string]uint64{}}
}

// drop forgets s: closed or expired.
func (v *views) drop(s simba.SessionID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, s)
}

// CheckedLeases is how many leases of its view a keep-alive checks
// against their rows, whatever the generation says: a row changed by hand
// (or by anything but this backend's statements) is noticed after about
// n/CheckedLeases keep-alives for a session holding n leases.
const CheckedLeases = 5

// Check is a lease a keep-alive checks: the view says the session holds
// Name with Token.
type Check struct {
	Name  string
	Token uint64
}

// known returns the generation to send with a keep-alive of s, by how
// much the server's may exceed it without listing the leases, and up to
// CheckedLeases leases of the view to check (the first ones of a map
// iteration, whose order Go varies).
func (v *views) known(s simba.SessionID) (gen, lag int64, check []Check) {
	v.mu.Lock()
	defer v.mu.Unlock()
	lv := v.m[s]
	if lv == nil || lv.gen == unknownGen {
		return unknownGen, 0, nil
	}
	for name, tok := range lv.leases {
		if len(check) == CheckedLeases {
			break
		}
		check = append(check, Check{Name: name, Token: tok})
	}
	return lv.gen, int64(lv.flight + len(lv.ahead)), check
}

// gone drops from the view of s the leases a keep-alive found no longer
// held with the token the view has, and makes the next keep-alive list
// them all.
func (v *views) gone(s simba.SessionID, lost []Check) {
	v.mu.Lock()
	defer v.mu.Unlock()
	lv := v.m[s]
	if lv == nil || len(lost) == 0 {
		return
	}
	if lv.shared {
		lv.leases, lv.shared = maps.Clone(lv.leases), false
	}
	for _, c := range lost {
		if lv.leases[c.Name] == c.Token {
			delete(lv.leases, c.Name)
		}
	}
	lv.gen = unknownGen
	clear(lv.ahead)
}

// wasListed reports whether a keep-alive that sent known and lag and read
// gen was sent the leases.
func wasListed(known, lag, gen int64) bool { return gen < known || gen > known+lag }

// begin and end bracket an Acquire or Release call of s.
func (v *views) begin(s simba.SessionID) { v.inFlight(s, 1) }
func (v *views) end(s simba.SessionID)   { v.inFlight(s, -1) }

func (v *views) inFlight(s simba.SessionID, d int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if lv := v.m[s]; lv != nil {
		lv.flight += d
	}
}

// unsure marks the view of s to be read in full by the next keep-alive:
// a call's outcome is unknown.
func (v *views) unsure(s simba.SessionID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if lv := v.m[s]; lv != nil {
		lv.gen = unknownGen
		clear(lv.ahead)
	}
}

// change records a change of generation gen (gen <= 0: none was reported).
func (v *views) change(s simba.SessionID, gen int64, op leaseOp) {
	if gen <= 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	lv := v.m[s]
	if lv == nil || (lv.gen != unknownGen && gen <= lv.gen) {
		return
	}
	if lv.ahead == nil {
		lv.ahead = map[int64]leaseOp{}
	}
	lv.ahead[gen] = op
	lv.fold()
}

// reply returns the leases of s after a keep-alive that read generation
// gen and, when it differed from the one sent, listed (all the session's
// leases at gen). The map returned is shared and must not be changed.
func (v *views) reply(s simba.SessionID, gen int64, listed map[string]uint64) map[string]uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	lv := v.m[s]
	if lv == nil {
		if listed == nil {
			return map[string]uint64{} // not reached: a view is never dropped while in use
		}
		lv = &leaseView{gen: unknownGen, leases: map[string]uint64{}}
		if v.m == nil {
			v.m = map[simba.SessionID]*leaseView{}
		}
		v.m[s] = lv
	}
	if listed != nil && (lv.gen == unknownGen || gen > lv.gen) {
		// The list is newer than the view: it becomes the view, and the
		// changes replied since it was read are applied on top of it.
		lv.gen, lv.leases, lv.shared = gen, listed, false
		for g := range lv.ahead {
			if g <= gen {
				delete(lv.ahead, g)
			}
		}
		lv.fold()
	}
	lv.shared = true
	if len(lv.ahead) == 0 {
		return lv.leases
	}
	// Changes replied but waiting for an earlier one: the engine may have
	// adopted them already.
	out := maps.Clone(lv.leases)
	gens := slices.Sorted(maps.Keys(lv.ahead))
	for _, g := range gens {
		apply(out, lv.ahead[g])
	}
	return out
}

// apply makes op's change to leases: an acquire only raises a token, a
// release frees only its own.
func apply(leases map[string]uint64, op leaseOp) {
	switch cur, held := leases[op.name]; {
	case op.acquire && (!held || op.token > cur):
		leases[op.name] = op.token
	case !op.acquire && held && cur == op.token:
		delete(leases, op.name)
	}
}

// fold applies the changes that follow gen, in order.
func (lv *leaseView) fold() {
	if lv.gen == unknownGen {
		return
	}
	for {
		op, ok := lv.ahead[lv.gen+1]
		if !ok {
			return
		}
		delete(lv.ahead, lv.gen+1)
		lv.gen++
		if lv.shared {
			lv.leases, lv.shared = maps.Clone(lv.leases), false
		}
		apply(lv.leases, op)
	}
}
