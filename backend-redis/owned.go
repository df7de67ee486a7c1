package simbaredis

import (
	"crypto/sha1"
	"encoding/binary"
	"maps"
	"strconv"
	"sync"
)

// leaseDigest is the share of one lease in a session's digest (ADR 0015):
//
//	(A * (token mod 10^6) + b) mod 2^40 - 2^39
//
// with the coefficients of the name from its SHA-1 (nameCoefficients): A
// odd and of 40 bits, b of 40 bits. A lease missing on one side shifts the
// sum by a pseudo-random 40-bit value, a token that differs by d (0 < |d| <
// 10^6) by A * d, never 0 mod 2^40 since A is odd. The scripts compute the
// same in Lua (luaShare): every step is an integer below 2^53, exact in a
// double. Acquire sends the coefficients and Release the share, so that
// neither script hashes; only the keep-alive hashes a name, when it drops
// or corrects a lease. A session's digest is the sum of the shares of its
// leases; with shares below 2^39 the sum of up to 2^24 leases cannot
// overflow the server's 64-bit counter.
func leaseDigest(name string, token uint64) int64 {
	hi, lo, b := nameCoefficients(name)
	return leaseShare(hi, lo, b, token)
}

// nameCoefficients are the digest coefficients of a lease name, from the
// first 80 bits of its SHA-1 (the first 20 hexadecimal digits): hi = digits
// 1-5, lo = digits 6-10 with the lowest bit set (A = hi * 2^20 + lo is
// odd), b = digits 11-20.
func nameCoefficients(name string) (hi, lo, b int64) {
	h := sha1.Sum([]byte(name))
	top := binary.BigEndian.Uint64(h[:8])
	hi = int64(top >> 44)
	lo = int64(top>>24&(1<<20-1)) | 1
	b = int64(top&(1<<24-1))<<16 | int64(h[8])<<8 | int64(h[9])
	return hi, lo, b
}

// leaseShare is leaseDigest from the coefficients, step by step as the
// Lua share function computes it.
func leaseShare(hi, lo, b int64, token uint64) int64 {
	n := int64(token % 1_000_000)
	return ((hi*n)%(1<<20)*(1<<20)+lo*n+b)%(1<<40) - 1<<39
}

// ownedViews is what a Backend believes each of its sessions owns, kept
// from the replies of its own Acquire and Release calls, so that a
// keep-alive can send the digest of that view and receive the list of
// leases only when the server's differs (ADR 0007). A view is only ever a
// guess: a keep-alive reports the view it sent only after the server
// confirmed its digest, and otherwise the server's own list.
type ownedViews struct {
	mu    sync.Mutex
	views map[string]*ownedView
}

// ownedView is the view of one session.
type ownedView struct {
	// leases maps name to token. Once handed out in a keep-alive reply it
	// is shared (read-only): the next change copies it first.
	leases map[string]uint64
	shared bool
	digest int64 // sum of leaseDigest over leases
	known  bool  // leases came from the server or from a new session
	// inFlight counts the keep-alives sent and not yet answered; while it
	// is not zero, changes are also logged, so that a list the server
	// sends back can be brought up to date with the replies that arrived
	// meanwhile.
	inFlight int
	log      []leaseChange
}

// leaseChange is the outcome of one Acquire (won) or Release (released).
type leaseChange struct {
	name  string
	token uint64
	won   bool
}

// opened starts the view of a new session: it owns nothing.
func (o *ownedViews) opened(sid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.views == nil {
		o.views = make(map[string]*ownedView)
	}
	o.views[sid] = &ownedView{leases: map[string]uint64{}, known: true}
}

// forget drops the view of a session that ended.
func (o *ownedViews) forget(sid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.views, sid)
}

// record applies the outcome of an Acquire or Release of sid's.
func (o *ownedViews) record(sid string, c leaseChange) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.views[sid]
	if v == nil {
		return
	}
	v.apply(c)
	if v.inFlight > 0 {
		v.log = append(v.log, c)
	}
}

// sending is called before a keep-alive of sid is sent. It returns the
// digest to send ("" when the view is not known yet), the view it stands
// for, and the position in the log of changes that arrive from then on.
func (o *ownedViews) sending(sid string) (seen string, view map[string]uint64, mark int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.views == nil {
		o.views = make(map[string]*ownedView)
	}
	v := o.views[sid]
	if v == nil {
		// A session this Backend did not open, or whose view it dropped:
		// the first reply brings the list.
		v = &ownedView{}
		o.views[sid] = v
	}
	v.inFlight++
	if !v.known {
		return "", nil, len(v.log)
	}
	v.shared = true
	return strconv.FormatInt(v.digest, 10), v.leases, len(v.log)
}

// answered is called after a keep-alive of sid, sent when the log was at
// mark, was answered (ok) or failed. When the server sent its list
// (leases not nil), the list and the server's digest become the view and
// the changes logged since mark are applied again on top: each of them
// either already shows in the list or happened after the script ran.
func (o *ownedViews) answered(sid string, mark int, ok bool, leases map[string]uint64, digest int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.views[sid]
	if v == nil {
		return
	}
	v.inFlight--
	if ok && leases != nil {
		v.leases, v.shared, v.digest, v.known = leases, true, digest, true
		if mark <= len(v.log) {
			for _, c := range v.log[mark:] {
				v.apply(c)
			}
		}
	}
	if v.inFlight <= 0 {
		v.inFlight, v.log = 0, nil
	}
}

// apply changes the view as the server did. A won term replaces an older
// one of the name and never a newer one (a late reply); a release removes
// the name only at its token.
func (v *ownedView) apply(c leaseChange) {
	if !v.known {
		return
	}
	cur, held := v.leases[c.name]
	switch {
	case c.won && held && cur >= c.token:
		return
	case !c.won && (!held || cur != c.token):
		return
	}
	if v.shared {
		v.leases, v.shared = maps.Clone(v.leases), false
	}
	if held {
		v.digest -= leaseDigest(c.name, cur)
		delete(v.leases, c.name)
	}
	if c.won {
		v.leases[c.name] = c.token
		v.digest += leaseDigest(c.name, c.token)
	}
}
