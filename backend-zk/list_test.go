package simbazk

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// TestListHolders: before any lease was taken (no Root/leases yet) the
// listing is empty; a node of Root/leases whose name is not a lease name
// (made by hand) is left out; 120 held leases come back in name order,
// by pages of 50, from a backend that opened no session.
func TestListHolders(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	r := newReader(t, b, servers)
	if p, err := r.ListHolders(ctx(t), simba.ListQuery{Limit: 10}); err != nil || len(p.Leases) != 0 || p.Next != "" {
		t.Fatalf("ListHolders before any lease = %+v, %v; want an empty last page", p, err)
	}
	s := mustOpenAs(t, b, 10*time.Second, "lister")
	var want []string
	for i := range 120 {
		name := fmt.Sprintf("z-%03d", i)
		if res, err := b.Acquire(ctx(t), s, name); err != nil || !res.Won {
			t.Fatalf("Acquire(%q) = %+v, %v", name, res, err)
		}
		want = append(want, name)
	}
	a := dialAdmin(t, servers)
	defer a.close()
	if _, err := a.conn.Create(b.Root()+"/leases/z not a name", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create a foreign node: %v", err)
	}
	var got []string
	q := simba.ListQuery{Prefix: "z-", Limit: 50}
	for pages := 1; ; pages++ {
		p, err := r.ListHolders(ctx(t), q)
		if err != nil {
			t.Fatalf("ListHolders(%+v): %v", q, err)
		}
		for _, l := range p.Leases {
			if l.Holder.Session != s || l.Holder.Identity != "lister" || l.Holder.Token == 0 {
				t.Fatalf("%q held by %+v, want session %s, identity lister", l.Name, l.Holder, s)
			}
			got = append(got, l.Name)
		}
		if p.Next == "" {
			break
		}
		if pages == 3 {
			t.Fatalf("a next page after 3 pages of 50: %q", p.Next)
		}
		q.Cursor = p.Next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listed %v\nwant %v", got, want)
	}
}
