package sqltest

import (
	"fmt"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// testListBoundsRowsRead: a page reads a bounded number of lease rows,
// whatever the table holds. Among 60 free rows (released, or owned by a
// session that expired by the database clock but was not cleaned up
// yet), the pages of two leases read at most eight rows each, so the
// first ones are empty and still have a next page, and the walk ends with
// the two held leases past them, and the one held before them.
func testListBoundsRowsRead(t *testing.T, f *fixture) {
	b := f.backend()
	s := open(t, b, time.Minute)
	dead := open(t, b, time.Minute)
	first := acquire(t, b, s, "q-000").Token
	for i := 1; i <= 60; i++ {
		name := fmt.Sprintf("q-%03d", i)
		if i%2 == 0 {
			acquire(t, b, dead, name)
			continue
		}
		if err := b.Release(ctxT(t), s, name, acquire(t, b, s, name).Token); err != nil {
			t.Fatal(err)
		}
	}
	f.expire(dead)
	want := map[string]uint64{"q-000": first, "q-070": acquire(t, b, s, "q-070").Token, "q-071": acquire(t, b, s, "q-071").Token}
	acquire(t, b, s, "r-000") // outside the prefix

	q := simba.ListQuery{Prefix: "q-", Limit: 2}
	got := map[string]uint64{}
	pages, empty := 0, 0
	for {
		pages++
		p, err := b.ListHolders(ctxT(t), q)
		if err != nil {
			t.Fatalf("ListHolders(%+v): %v", q, err)
		}
		if len(p.Leases) == 0 {
			empty++
		}
		for _, l := range p.Leases {
			if l.Holder.Session != s {
				t.Fatalf("ListHolders(%+v) listed %q held by %s, want %s", q, l.Name, l.Holder.Session, s)
			}
			got[l.Name] = l.Holder.Token
		}
		if p.Next == "" {
			break
		}
		if pages > 100 {
			t.Fatalf("still a next page after %d pages", pages)
		}
		q.Cursor = p.Next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the walk listed %v, want %v", got, want)
	}
	// 64 rows of the prefix, 8 read a page: at least 8 pages, and the
	// pages that read only free rows are empty.
	if pages < 8 || empty < 5 {
		t.Fatalf("the walk took %d pages (%d empty), want at least 8 (5 empty): a page must read at most 4 rows per lease of its limit", pages, empty)
	}
}
