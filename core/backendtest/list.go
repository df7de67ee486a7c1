package backendtest

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	simba "github.com/simba-go/simba/core"
)

// listMaxPages bounds a walk of the listing: a backend whose cursor makes
// no progress fails instead of looping.
const listMaxPages = 2000

// testListHolders checks simba.HolderLister, when the backend implements
// it: a walk of every page under a prefix lists exactly the leases a live
// session holds, with their holders, and none that was released, whose
// session was closed or expired, or whose name lies outside the prefix;
// no page holds more than the limit, each is in name order, and the
// cursor makes progress. Queries that ValidateListQuery refuses fail with
// ErrInvalidArgument.
func testListHolders(e *env) {
	na := e.node()
	l, ok := na.(simba.HolderLister)
	if !ok {
		e.t.Skip("the backend does not implement simba.HolderLister")
	}
	_, identities := na.(simba.IdentityOpener)
	const identity = "lister-a:7 (test)"
	a := e.openFor(na, identity, max(30*time.Second, e.h.Lease))
	b := e.openLong(e.node())
	p := e.prefix
	want := map[string]simba.Holder{}
	take := func(s *session, name, identity string) {
		e.t.Helper()
		want[p+name] = simba.Holder{Session: s.id, Identity: identity, Token: s.win(p + name)}
	}
	for _, n := range []string{"a1", "a10", "a2", "b1"} {
		take(a, n, identity)
	}
	take(b, "a3", "")
	a.release(p+"a4", a.win(p+"a4"))
	c := e.openLong(e.node())
	c.win(p + "a5")
	c.close()

	ctx, cancel := e.ctx()
	defer cancel()
	walk := func(prefix string, limit int) map[string]simba.Holder {
		e.t.Helper()
		got := map[string]simba.Holder{}
		q := simba.ListQuery{Prefix: prefix, Limit: limit}
		last := ""
		for page := 0; ; page++ {
			if page == listMaxPages {
				e.t.Fatalf("ListHolders(%+v): still a next page after %d pages", q, page)
			}
			r, err := l.ListHolders(ctx, q)
			if err != nil {
				e.t.Fatalf("ListHolders(%+v): %v", q, err)
			}
			if len(r.Leases) > limit {
				e.t.Fatalf("ListHolders(%+v) returned %d leases, more than the limit", q, len(r.Leases))
			}
			for i, h := range r.Leases {
				switch {
				case !strings.HasPrefix(h.Name, prefix):
					e.t.Fatalf("ListHolders(%+v) listed %q, outside the prefix", q, h.Name)
				case i > 0 && h.Name <= r.Leases[i-1].Name:
					e.t.Fatalf("ListHolders(%+v) listed %q after %q: a page is in name order, each name once", q, h.Name, r.Leases[i-1].Name)
				case !e.h.ListUnordered && h.Name <= last:
					e.t.Fatalf("ListHolders(%+v) listed %q after %q on an earlier page: a walk is in name order, each name once", q, h.Name, last)
				}
				if seen, again := got[h.Name]; again && seen != h.Holder {
					e.t.Fatalf("ListHolders(%+v) listed %q again with holder %+v, after %+v", q, h.Name, h.Holder, seen)
				}
				got[h.Name] = h.Holder
				last = max(last, h.Name)
			}
			switch r.Next {
			case "":
				return got
			case q.Cursor:
				e.t.Fatalf("ListHolders(%+v) returned its own cursor as the next one: the walk makes no progress", q)
			}
			q.Cursor = r.Next
		}
	}
	check := func(prefix string, limit int, names ...string) {
		e.t.Helper()
		got := walk(prefix, limit)
		for _, n := range names {
			w := want[p+n]
			h, ok := got[p+n]
			switch {
			case !ok:
				e.t.Fatalf("a walk of prefix %q by pages of %d missed %q, held by %s at token %d (listed: %v)", prefix, limit, p+n, w.Session, w.Token, slices.Sorted(maps.Keys(got)))
			case h.Session != w.Session || h.Token != w.Token:
				e.t.Fatalf("a walk of prefix %q listed %q held by %s at token %d, want %s at token %d", prefix, p+n, h.Session, h.Token, w.Session, w.Token)
			case identities && h.Identity != w.Identity:
				e.t.Fatalf("a walk of prefix %q listed %q with identity %q, want %q as opened", prefix, p+n, h.Identity, w.Identity)
			case !h.Since.IsZero() && (time.Since(h.Since) > time.Minute || time.Until(h.Since) > time.Minute):
				e.t.Fatalf("a walk of prefix %q listed %q since %v, more than a minute from now", prefix, p+n, h.Since)
			}
			delete(got, p+n)
		}
		for n := range got {
			why := "not held by a live session"
			if !strings.HasPrefix(n, p) {
				why = "not one of this check's names"
			}
			e.t.Fatalf("a walk of prefix %q by pages of %d listed %q: %s (a4 was released, a5's session closed)", prefix, limit, n, why)
		}
	}
	check(p, 100, "a1", "a10", "a2", "a3", "b1")
	check(p+"a", 2, "a1", "a10", "a2", "a3")
	check(p+"a1", 1, "a1", "a10")
	check(p+"b1", 1, "b1")
	check(p+"zz", 5)

	for _, q := range []simba.ListQuery{
		{Prefix: p, Limit: 0},
		{Prefix: p, Limit: simba.MaxListLimit + 1},
		{Prefix: p + "/", Limit: 1},
		{Prefix: p, Cursor: "a b", Limit: 1},
	} {
		if r, err := l.ListHolders(ctx, q); !errors.Is(err, simba.ErrInvalidArgument) {
			e.t.Fatalf("ListHolders(%+v) = %+v, %v; want an error matching ErrInvalidArgument", q, r, err)
		}
	}

	// x is never kept alive: its lease is listed, and once the store has
	// ended its session, no longer. Like the expiry check, the store may
	// end it a little late, within a lease.
	opened := time.Now()
	x := e.open(e.node())
	take(x, "a6", "")
	check(p+"a6", 10, "a6")
	giveUp := opened.Add(e.h.Lease + max(e.h.Lease, time.Second))
	for {
		if _, listed := walk(p+"a6", 10)[p+"a6"]; !listed {
			break
		}
		if time.Now().After(giveUp) {
			e.t.Fatalf("%q is still listed %v after its session %s was opened with a lease of %v and never kept alive", p+"a6", time.Since(opened), x.id, e.h.Lease)
		}
		time.Sleep(e.h.Lease / 20)
	}
	delete(want, p+"a6")
	check(p, 3, "a1", "a10", "a2", "a3", "b1")
}
