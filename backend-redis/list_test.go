package simbaredis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// TestListHoldersWalk walks 300 held leases among keys of other kinds
// (sessions, a key of the lease form that is not a hash) by pages of 7:
// no page holds more, each is in name order, and the walk lists every
// held lease once, since nothing shrank meanwhile.
func TestListHoldersWalk(t *testing.T) {
	url := serverURL(t)
	b := openBackend(t, url, Options{})
	raw := rawClient(t, url)
	g, err := b.OpenSessionAs(callCtx(t), time.Minute, "walker")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{}
	for i := range 300 {
		name := fmt.Sprintf("w-%03d", i)
		r, err := b.Acquire(callCtx(t), g.ID, name)
		if err != nil || !r.Won {
			t.Fatalf("Acquire(%q) = %+v, %v", name, r, err)
		}
		want[name] = r.Token
	}
	if err := raw.Set(callCtx(t), b.KeyPrefix()+"lease:w-bogus", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	q := simba.ListQuery{Prefix: "w-", Limit: 7}
	got := map[string]uint64{}
	for pages := 1; ; pages++ {
		p, err := b.ListHolders(callCtx(t), q)
		if err != nil {
			t.Fatalf("ListHolders(%+v): %v", q, err)
		}
		if len(p.Leases) > q.Limit {
			t.Fatalf("page %d: %d leases, more than the limit", pages, len(p.Leases))
		}
		for i, l := range p.Leases {
			if i > 0 && l.Name <= p.Leases[i-1].Name {
				t.Fatalf("page %d: %q after %q", pages, l.Name, p.Leases[i-1].Name)
			}
			if _, again := got[l.Name]; again {
				t.Fatalf("page %d: %q listed again", pages, l.Name)
			}
			if l.Holder.Session != g.ID || l.Holder.Identity != "walker" || l.Holder.Since.IsZero() {
				t.Fatalf("page %d: %q held by %+v", pages, l.Name, l.Holder)
			}
			got[l.Name] = l.Holder.Token
		}
		if p.Next == "" {
			break
		}
		if pages > 1000 {
			t.Fatal("no end after 1000 pages")
		}
		q.Cursor = p.Next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the walk listed %d leases, want the %d held", len(got), len(want))
	}
}

// TestListHoldersSparse walks, by pages of 1, the 40 leases of a prefix
// on a private server that holds 60,000 other keys: a page whose SCAN
// calls find nothing widens them, so the walk takes a few pages per held
// lease rather than one per 16 keys of the server (3,750 pages), and
// every cursor stays within simba.MaxCursorLength.
func TestListHoldersSparse(t *testing.T) {
	url := startServer(t).url()
	b := openBackend(t, url, Options{})
	raw := rawClient(t, url)
	pipe := raw.Pipeline()
	for i := range 60_000 {
		pipe.Set(callCtx(t), fmt.Sprintf("other:%d", i), "x", 0)
	}
	if _, err := pipe.Exec(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	g, err := b.OpenSession(callCtx(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for i := range 40 {
		name := fmt.Sprintf("s-%02d", i)
		mustWin(t, b, g.ID, name)
		want[name] = true
	}
	q := simba.ListQuery{Prefix: "s-", Limit: 1}
	got := map[string]bool{}
	pages := 1
	for ; ; pages++ {
		p, err := b.ListHolders(callCtx(t), q)
		if err != nil {
			t.Fatalf("page %d: ListHolders: %v", pages, err)
		}
		for _, l := range p.Leases {
			got[l.Name] = true
		}
		if len(p.Next) > simba.MaxCursorLength {
			t.Fatalf("page %d: a cursor of %d bytes", pages, len(p.Next))
		}
		if p.Next == "" {
			break
		}
		if pages == 400 {
			t.Fatalf("no end after %d pages, %d of the 40 leases listed: the SCAN calls read too few keys a page", pages, len(got))
		}
		q.Cursor = p.Next
	}
	if len(got) != len(want) {
		t.Fatalf("the walk listed %d leases, want the %d held", len(got), len(want))
	}
	t.Logf("%d pages", pages)
}

// TestListHoldersCursor: the leases a cursor carries over are read again
// on the next page (a freed one is left out), and a cursor this backend
// did not return is refused.
func TestListHoldersCursor(t *testing.T) {
	url := serverURL(t)
	b := openBackend(t, url, Options{})
	g, err := b.OpenSession(callCtx(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]uint64{}
	for _, name := range []string{"c-1", "c-2", "c-3"} {
		r, err := b.Acquire(callCtx(t), g.ID, name)
		if err != nil || !r.Won {
			t.Fatalf("Acquire(%q) = %+v, %v", name, r, err)
		}
		tokens[name] = r.Token
	}
	if err := b.Release(callCtx(t), g.ID, "c-2", tokens["c-2"]); err != nil {
		t.Fatal(err)
	}
	// SCAN done (0), three names carried over, one freed since; the limit
	// of 1 carries the third over again.
	p, err := b.ListHolders(callCtx(t), simba.ListQuery{Prefix: "c-", Cursor: "0,c-1,c-2,c-3", Limit: 1})
	switch {
	case err != nil:
		t.Fatal(err)
	case len(p.Leases) != 1 || p.Leases[0].Name != "c-1" || p.Leases[0].Holder.Token != tokens["c-1"]:
		t.Fatalf("page of the carried names = %+v, want c-1 alone", p.Leases)
	case p.Next != "0,c-3":
		t.Fatalf("next = %q, want 0,c-3", p.Next)
	}
	p, err = b.ListHolders(callCtx(t), simba.ListQuery{Prefix: "c-", Cursor: p.Next, Limit: 5})
	if err != nil || len(p.Leases) != 1 || p.Leases[0].Name != "c-3" || p.Next != "" {
		t.Fatalf("last page = %+v, %v; want c-3 alone and no next", p, err)
	}
	// A cursor carrying more names than a page may hold was not made by a
	// listing: refused before a script reads the holders of every one.
	tooMany := "0" + strings.Repeat(",c-1", simba.MaxListLimit+1)
	for _, give := range []string{"x", "-1", "5,", "5,bad/name", "5,d-1", "18446744073709551616", tooMany} {
		if _, err := b.ListHolders(callCtx(t), simba.ListQuery{Prefix: "c-", Cursor: give, Limit: 5}); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("cursor %.60q: %v, want ErrInvalidArgument", give, err)
		}
	}
}

// TestListHoldersRing: a Ring's keys cannot be walked.
func TestListHoldersRing(t *testing.T) {
	opts, err := redis.ParseURL(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": opts.Addr}})
	t.Cleanup(func() { _ = ring.Close() })
	b, err := New(ring, Options{KeyPrefix: testPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if _, err := b.ListHolders(callCtx(t), simba.ListQuery{Limit: 1}); !errors.Is(err, simba.ErrNotSupported) {
		t.Fatalf("ListHolders on a Ring = %v, want ErrNotSupported", err)
	}
}

// TestListCursorErrorsRead: a refused cursor is told to be one that no
// listing returned, in words that read.
func TestListCursorErrorsRead(t *testing.T) {
	for _, tt := range []struct {
		q    simba.ListQuery
		want string
	}{
		{simba.ListQuery{Cursor: "x"}, `simbaredis: list cursor "x" is not a cursor that a listing returned: `},
		{simba.ListQuery{Prefix: "c-", Cursor: "5,d-1"}, `simbaredis: list cursor "5,d-1" is not a cursor that a listing of prefix "c-" returned: `},
	} {
		_, _, err := parseListCursor(tt.q)
		if !errors.Is(err, simba.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("cursor %q: %v; want %q", tt.q.Cursor, err, tt.want)
		}
	}
}
