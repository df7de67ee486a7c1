package simba_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// Any node lists the leases held under a prefix, page by page, with their
// holders; Holders walks every page.
func TestListHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		a := newClient(t, s.Connect(), simba.WithIdentity("node-a"))
		b := newClient(t, s.Connect())
		ctx := context.Background()
		var want []string
		for i := range 250 {
			name := fmt.Sprintf("job-%03d", i)
			term, err := a.Lock(name).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i%50 == 0 {
				_ = term.Close() // released: never listed
				continue
			}
			want = append(want, name)
		}
		if _, err := a.Lock("other").Acquire(ctx); err != nil {
			t.Fatal(err)
		}

		p, err := b.ListHolders(ctx, simba.ListQuery{Prefix: "job-", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Leases) != 10 || p.Leases[0].Name != "job-001" || p.Next != "job-010" {
			t.Fatalf("first page: %d leases from %q, next %q; want 10 from job-001, next job-010", len(p.Leases), p.Leases[0].Name, p.Next)
		}
		if h := p.Leases[0].Holder; h.Identity != "node-a" || h.Token == 0 || h.Session != a.Snapshot().Session.ID {
			t.Fatalf("holder of job-001: %+v", h)
		}
		var got []string
		for l, err := range b.Holders(ctx, "job-") {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, l.Name)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("Holders(job-) listed %d names, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
		}
		n := 0
		for _, err := range b.Holders(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			n++
			if n == 3 {
				break // stopping the walk is allowed
			}
		}
	})
}

// Bad queries fail before any backend call, with ErrInvalidArgument.
func TestListHoldersInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := memory.New().Connect()
		c := newClient(t, conn)
		for _, give := range []simba.ListQuery{
			{Limit: 0},
			{Limit: -1},
			{Limit: simba.MaxListLimit + 1},
			{Prefix: "a/b", Limit: 1},
			{Prefix: strings.Repeat("a", simba.MaxNameLength+1), Limit: 1},
			{Prefix: "é", Limit: 1},
			{Cursor: "a b", Limit: 1},
			{Cursor: "a\n", Limit: 1},
			{Cursor: strings.Repeat("a", simba.MaxCursorLength+1), Limit: 1},
		} {
			if _, err := c.ListHolders(context.Background(), give); !errors.Is(err, simba.ErrInvalidArgument) {
				t.Errorf("ListHolders(%.80v) = %v, want ErrInvalidArgument", give, err)
			}
		}
		if n := conn.Calls()[memory.OpListHolders]; n != 0 {
			t.Errorf("%d calls reached the backend, want none", n)
		}
		for _, give := range []string{"", ".", "..", "a", strings.Repeat("z", simba.MaxNameLength), "job-1:x_y.z"} {
			if err := simba.ValidatePrefix(give); err != nil {
				t.Errorf("ValidatePrefix(%q) = %v, want nil", give, err)
			}
		}
		if _, err := c.ListHolders(context.Background(), simba.ListQuery{Cursor: "not a name", Limit: 1}); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("a cursor the backend never returned: %v, want ErrInvalidArgument", err)
		}
	})
}

// A backend without the capability gives ErrNotSupported, from both
// calls.
func TestListHoldersNotSupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, struct{ simba.Backend }{memory.New().Connect()})
		if _, err := c.ListHolders(context.Background(), simba.ListQuery{Limit: 1}); !errors.Is(err, simba.ErrNotSupported) {
			t.Fatalf("ListHolders = %v, want ErrNotSupported", err)
		}
		for _, err := range c.Holders(context.Background(), "") {
			if !errors.Is(err, simba.ErrNotSupported) {
				t.Fatalf("Holders = %v, want ErrNotSupported", err)
			}
		}
	})
}

// stuckLister hands back the cursor it was given.
type stuckLister struct{ *memory.Conn }

func (s stuckLister) ListHolders(_ context.Context, q simba.ListQuery) (simba.HolderPage, error) {
	return simba.HolderPage{Next: "x"}, nil
}

// A walk ends with an error, not a loop, when the backend's cursor makes
// no progress.
func TestHoldersStuckCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, stuckLister{memory.New().Connect()})
		pages := 0
		for _, err := range c.Holders(context.Background(), "") {
			pages++
			if err == nil || pages > 1 {
				t.Fatalf("walk %d: %v, want one error", pages, err)
			}
		}
	})
}

// Every lock a fleet holds under a prefix, whichever node holds it: the
// walk reads 100 leases a page until the last one.
func ExampleClient_Holders() {
	store := memory.New()
	worker, err := simba.New(store, simba.WithIdentity("worker-1"))
	if err != nil {
		panic(err)
	}
	defer worker.Close(context.Background())
	ops, err := simba.New(store)
	if err != nil {
		panic(err)
	}
	defer ops.Close(context.Background())

	for _, name := range []string{"invoice.17", "invoice.42", "report"} {
		if _, err := worker.Lock(name).Acquire(context.Background()); err != nil {
			panic(err)
		}
	}
	for l, err := range ops.Holders(context.Background(), "invoice.") {
		if err != nil {
			fmt.Println("listing stopped:", err)
			break
		}
		fmt.Println(l.Name, "held by", l.Holder.Identity, "with token", l.Holder.Token)
	}
	// Output:
	// invoice.17 held by worker-1 with token 1
	// invoice.42 held by worker-1 with token 1
}

// One page at a time, as a tool that prints a page and its cursor does.
func ExampleClient_ListHolders() {
	store := memory.New()
	c, err := simba.New(store, simba.WithIdentity("node-a"))
	if err != nil {
		panic(err)
	}
	defer c.Close(context.Background())
	for _, name := range []string{"job-1", "job-2", "job-3"} {
		if _, err := c.Lock(name).Acquire(context.Background()); err != nil {
			panic(err)
		}
	}
	q := simba.ListQuery{Prefix: "job-", Limit: 2}
	for {
		p, err := c.ListHolders(context.Background(), q)
		if err != nil {
			panic(err)
		}
		for _, l := range p.Leases {
			fmt.Println(l.Name, l.Holder.Identity)
		}
		if p.Next == "" {
			break
		}
		fmt.Println("next page after", p.Next)
		q.Cursor = p.Next
	}
	// Output:
	// job-1 node-a
	// job-2 node-a
	// next page after job-2
	// job-3 node-a
}
