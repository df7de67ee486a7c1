package sqlcore

import (
	"maps"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// A live session's leases change only through its own calls: a take-over
// needs the owner expired, and an expired session is never renewed. The
// Backend keeps, per session it serves, the leases its own Acquire and
// Release replies won and freed, and a keep-alive replies with that view
// instead of listing the session's leases, so it reads the session row,
// a few leases and the group counts whatever the number of leases held.
//
// The view is unknown, and the next keep-alive lists the leases, when the
// Backend cannot know what the session owns: a call whose outcome is
// unknown (an error, a context that ended), a session this Backend did
// not open, or a check that found a lease of the view changed (see
// CheckedLeases). A listing is read from one snapshot while calls of the
// session may be in flight: the changes replied after the keep-alive was
// sent are applied on top of it. A change is applied by token (an acquire
// only raises a token, a release frees only its own), so a change that the
// snapshot already holds changes nothing.
//
// A call whose outcome is unknown may still be running on the server (its
// cancel request lost, or waiting for a row lock) and commit after a
// listing's snapshot: the view then stays unknown, and keep-alives list,
// until one is sent a lease duration after that call gave up.

// leaseOp is one change reported by an Acquire or Release reply.
type leaseOp struct {
	name    string
	token   uint64
	acquire bool // false: release
}

// leaseView is what one session owns, as far as the replies say.
type leaseView struct {
	known  bool              // false: the next keep-alive lists the leases
	leases map[string]uint64 // never nil
	shared bool              // leases was handed out in a reply: copy before changing
	// forgets counts the times the view became unknown: a listing sent
	// before the last one cannot make it known again.
	forgets uint64
	// lease is the session's lease duration as last asked; a listing sent
	// before unsureUntil, a lease after the last call whose outcome is
	// unknown, leaves the view unknown.
	lease       time.Duration
	unsureUntil time.Time
	// seen is when a call of the session last came: a view not seen for
	// two leases belongs to a session the server has expired, and goes
	// when another session opens.
	seen time.Time
	// listings counts the listing keep-alives in flight; while there is
	// one, every change replied is also appended to log, for them to apply
	// on top of their list.
	listings int
	log      []leaseOp
}

// views holds the leaseView of every session a Backend serves.
type views struct {
	mu sync.Mutex
	m  map[simba.SessionID]*leaseView
}

// open starts the view of a new session, which owns nothing.
func (v *views) open(s simba.SessionID, lease time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[simba.SessionID]*leaseView{}
	}
	now := time.Now()
	for id, lv := range v.m {
		if now.Sub(lv.seen) > 2*lv.lease {
			delete(v.m, id) // expired without a last keep-alive
		}
	}
	v.m[s] = &leaseView{known: true, leases: map[string]uint64{}, lease: lease, seen: now}
}

// drop forgets s: closed or expired.
func (v *views) drop(s simba.SessionID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, s)
}

// CheckedLeases is how many leases of its view a keep-alive that does not
// list checks against their rows: a lease freed or taken over by anything
// but this Backend's replies (another Backend on the session, a row
// changed by hand) is noticed after about n/CheckedLeases keep-alives for
// a session holding n leases, at the next one for n <= CheckedLeases.
const CheckedLeases = 5

// Check is a lease a keep-alive checks: the view says the session holds
// Name with Token.
type Check struct {
	Name  string
	Token uint64
}

// listing is what a keep-alive that lists the leases hands back to
// views.reply or views.abandon: where the view stood when it was sent.
type listing struct {
	forgets uint64    // leaseView.forgets
	from    int       // the index in leaseView.log of the first change replied after it
	sent    time.Time // when the keep-alive was sent
}

// keepAlive returns what a keep-alive of s sends: list when the view is
// unknown (then pass l to reply), otherwise up to CheckedLeases leases of
// the view to check (the first ones of a map iteration, whose order Go
// varies).
func (v *views) keepAlive(s simba.SessionID, lease time.Duration) (list bool, l listing, check []Check) {
	v.mu.Lock()
	defer v.mu.Unlock()
	lv := v.m[s]
	if lv == nil {
		// A session this Backend did not open: its view starts unknown,
		// and records the changes replied from now on.
		if v.m == nil {
			v.m = map[simba.SessionID]*leaseView{}
		}
		lv = &leaseView{leases: map[string]uint64{}}
		v.m[s] = lv
	}
	lv.lease, lv.seen = lease, time.Now()
	if !lv.known {
		lv.listings++
		return true, listing{forgets: lv.forgets, from: len(lv.log), sent: time.Now()}, nil
	}
	for name, tok := range lv.leases {
		if len(check) == CheckedLeases {
			break
		}
		check = append(check, Check{Name: name, Token: tok})
	}
	return false, listing{}, check
}

// unsure makes the keep-alives of s list the leases: a call's outcome is
// unknown, and stays so for a lease duration (see above).
func (v *views) unsure(s simba.SessionID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if lv := v.m[s]; lv != nil {
		lv.forget()
		lv.unsureUntil = time.Now().Add(lv.lease)
	}
}

func (lv *leaseView) forget() {
	lv.known = false
	lv.forgets++
}

// change applies the change a reply of s reported.
func (v *views) change(s simba.SessionID, op leaseOp) {
	v.mu.Lock()
	defer v.mu.Unlock()
	lv := v.m[s]
	if lv == nil {
		return // closed, expired, or never seen: a listing will tell
	}
	if lv.shared {
		lv.leases, lv.shared = maps.Clone(lv.leases), false
	}
	apply(lv.leases, op)
	if lv.listings > 0 {
		lv.log = append(lv.log, op)
	}
}

// reply returns the leases of s after a keep-alive: the view, with lost
// (the checked leases the session no longer holds with that token)
// removed, which makes the view unknown. A keep-alive that listed passes
// listed (every lease of the session, as of its snapshot) and the l that
// keepAlive gave it: the list, with the changes replied since the
// keep-alive was sent, becomes the view. The map returned is shared and
// must not be changed.
func (v *views) reply(s simba.SessionID, listed map[string]uint64, l *listing, lost []Check) map[string]uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	lv := v.m[s]
	if lv == nil {
		if listed == nil {
			return map[string]uint64{} // closed meanwhile: nothing to keep
		}
		return listed
	}
	if l != nil && lv.listings > 0 {
		leases := listed
		if leases == nil {
			leases = map[string]uint64{}
		}
		for _, op := range lv.log[min(l.from, len(lv.log)):] {
			apply(leases, op)
		}
		lv.leases, lv.shared = leases, false
		lv.known = lv.forgets == l.forgets && !l.sent.Before(lv.unsureUntil)
		lv.endListing()
	}
	for _, c := range lost {
		// A lease the view no longer has with that token was changed by a
		// reply: nothing this Backend did not see.
		if lv.leases[c.Name] != c.Token {
			continue
		}
		if lv.shared {
			lv.leases, lv.shared = maps.Clone(lv.leases), false
		}
		delete(lv.leases, c.Name)
		lv.forget()
	}
	lv.shared = true
	return lv.leases
}

// abandon ends a listing keep-alive of s that failed: the view stays
// unknown.
func (v *views) abandon(s simba.SessionID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if lv := v.m[s]; lv != nil && lv.listings > 0 {
		lv.endListing()
	}
}

func (lv *leaseView) endListing() {
	if lv.listings--; lv.listings == 0 {
		lv.log = lv.log[:0]
	}
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
