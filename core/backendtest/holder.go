package backendtest

import (
	"errors"
	"strings"
	"time"

	simba "github.com/simba-go/simba/core"
)

// testHolder checks simba.HolderReader, when the backend implements it:
// the live owner of a lease with its token (and identity, through
// simba.IdentityOpener), and nobody once the lease was never taken,
// released, or its owner's session closed.
func testHolder(e *env) {
	na, nb := e.node(), e.node()
	r, ok := nb.(simba.HolderReader)
	if !ok {
		e.t.Skip("the backend does not implement simba.HolderReader")
	}
	_, identities := na.(simba.IdentityOpener)
	const identity = "node-a:42 (é, 🔒)"
	a := e.openAs(na, identity)
	n := e.name("n")
	holder := func() (simba.Holder, bool) {
		e.t.Helper()
		ctx, cancel := e.ctx()
		defer cancel()
		h, ok, err := r.Holder(ctx, n)
		if err != nil {
			e.t.Fatalf("Holder(%q): %v", n, err)
		}
		return h, ok
	}
	none := func(why string) {
		e.t.Helper()
		if h, ok := holder(); ok {
			e.t.Fatalf("Holder(%q) = %+v, want nobody: %s", n, h, why)
		}
	}
	held := func(tok uint64, a *session) {
		e.t.Helper()
		h, ok := holder()
		switch {
		case !ok:
			e.t.Fatalf("Holder(%q) = nobody, want session %s at token %d", n, a.id, tok)
		case h.Session != a.id || h.Token != tok:
			e.t.Fatalf("Holder(%q) = %+v, want session %s at token %d", n, h, a.id, tok)
		case identities && h.Identity != identity:
			e.t.Fatalf("Holder(%q) identity %q, want %q as opened", n, h.Identity, identity)
		case !h.Since.IsZero() && (time.Since(h.Since) > time.Minute || time.Until(h.Since) > time.Minute):
			e.t.Fatalf("Holder(%q) since %v, more than a minute from now", n, h.Since)
		}
	}

	none("never taken")
	tok := a.win(n)
	held(tok, a)
	tok = a.winAbove(n, tok, "by its owner again")
	held(tok, a)
	a.release(n, tok)
	none("released")
	held2 := a.win(n)
	held(held2, a)
	a.close()
	none("its owner's session was closed")
	if identities { // simba.MaxIdentity bytes of four-byte characters (utf8mb4 on MySQL)
		longest := strings.Repeat("🔒", simba.MaxIdentity/4)
		m := e.openAs(na, longest)
		tok := m.win(n)
		if h, ok := holder(); !ok || h.Identity != longest || h.Token != tok {
			e.t.Fatalf("Holder(%q) = %+v, %v; want the longest identity at token %d", n, h, ok, tok)
		}
		m.close()
	}
	if e.h.Expire != nil {
		x := e.openAs(na, identity)
		tok := x.win(n)
		held(tok, x)
		e.h.Expire(e.t, x.id)
		none("its owner's session expired")
	}

	ctx, cancel := e.ctx()
	defer cancel()
	if _, _, err := r.Holder(ctx, "bad/name"); !errors.Is(err, simba.ErrInvalidName) {
		e.t.Fatalf("Holder(\"bad/name\") = %v, want an error matching ErrInvalidName", err)
	}
}
