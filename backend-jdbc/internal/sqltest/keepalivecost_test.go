package sqltest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

// testKeepAliveCostFlat: when nothing changed, a keep-alive that holds
// many leases reads about as many rows as one that holds one. It counts
// the rows the server reads (Harness.RowsRead), not time, so it does not
// depend on the load of the machine.
func testKeepAliveCostFlat(t *testing.T, f *fixture) {
	if f.h.RowsRead == nil {
		t.Fatal("the harness has no RowsRead")
	}
	const many = 2000
	perKeepAlive := func(leases int) int64 {
		t.Helper()
		prefix := uniquePrefix()
		t.Cleanup(func() { f.dropTables(prefix) })
		b, rows := f.h.RowsRead(t, f.raw, sqlcore.Options{TablePrefix: prefix, Migrate: true, CleanupInterval: -1})
		s := open(t, b, time.Minute)
		req := simba.KeepAliveRequest{Lease: time.Minute, Held: map[string]uint64{}, Generation: 1}
		for i := range leases {
			name := fmt.Sprintf("n%d", i)
			req.Held[name] = acquire(t, b, s, name).Token
		}
		keepAlive(t, b, s, time.Minute)
		best := int64(-1)
		for range 3 {
			before, err := rows(ctxT(t))
			if err != nil {
				t.Fatalf("rows read: %v", err)
			}
			if got, err := b.KeepAlive(ctxT(t), s, req); err != nil || len(got.Lost) != 0 {
				t.Fatalf("keep-alive: lost %v, %v; want nothing lost", got.Lost, err)
			}
			after, err := rows(ctxT(t))
			if err != nil {
				t.Fatalf("rows read: %v", err)
			}
			if n := after - before; best < 0 || n < best {
				best = n
			}
		}
		return best
	}
	one, some, lots := perKeepAlive(1), perKeepAlive(100), perKeepAlive(many)
	t.Logf("rows read per keep-alive: %d with 1 lease, %d with 100, %d with %d", one, some, lots, many)
	for _, c := range []struct {
		leases int
		rows   int64
	}{{100, some}, {many, lots}} {
		if c.rows > 2*max(one, 1) {
			t.Errorf("a keep-alive read %d rows with %d leases held, %d with 1: want at most twice as many", c.rows, c.leases, one)
		}
	}
}

// testKeepAliveSeesOtherChanges: a keep-alive checks the leases its
// request holds against their rows (every one here: fewer than
// simba.MinLeaseChecks), so a lease freed through another Backend on the
// same session, freed by hand or taken again at another token is reported
// lost; and it reports which of the unsure names the session owns, a
// lease won through another Backend or by an acquire cut short included.
func testKeepAliveSeesOtherChanges(t *testing.T, f *fixture) {
	b, other := f.backend(), f.backend()
	const lease = time.Minute
	s := open(t, b, lease)
	want := func(what string, held map[string]uint64, unsure []string, lost []string, owned map[string]uint64) {
		t.Helper()
		r, err := b.KeepAlive(ctxT(t), s, simba.KeepAliveRequest{Lease: lease, Held: held, Generation: 1, Unsure: unsure})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := slices.Sorted(slices.Values(r.Lost)); !slices.Equal(got, lost) || !maps.Equal(r.Owned, owned) {
			t.Fatalf("%s: keep-alive lost %v and owns %v, want %v and %v", what, r.Lost, r.Owned, lost, owned)
		}
	}
	tok := acquire(t, b, s, "mine").Token
	want("own acquire", map[string]uint64{"mine": tok}, nil, nil, nil)
	want("a token the session never had", map[string]uint64{"mine": tok + 1}, nil, []string{"mine"}, nil)
	ot := acquire(t, other, s, "theirs").Token
	want("acquire through another Backend", map[string]uint64{"mine": tok}, []string{"theirs", "nobody"}, nil, map[string]uint64{"theirs": ot})
	if err := other.Release(ctxT(t), s, "mine", tok); err != nil {
		t.Fatal(err)
	}
	want("release through another Backend", map[string]uint64{"mine": tok, "theirs": ot}, nil, []string{"mine"}, nil)
	again := acquire(t, b, s, "mine").Token
	want("taken again at another token", map[string]uint64{"mine": tok}, nil, []string{"mine"}, nil)
	want("held at the new token", map[string]uint64{"mine": again}, []string{"mine"}, nil, map[string]uint64{"mine": again})

	// An acquire cut short: the Backend cannot know whether it won; the
	// row below is written by hand, as a win would be.
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if _, err := b.Acquire(ctx, s, "late"); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
	q := "INSERT INTO " + f.prefix + "lease (name, session_id, token, acquired_at) VALUES ('late', ?, 7, " + f.h.Later(0) + ")"
	if err := f.admin.Exec(ctxT(t), q, string(s)); err != nil {
		t.Fatal(err)
	}
	want("after an acquire cut short", nil, []string{"late"}, nil, map[string]uint64{"late": 7})

	// A lease freed by hand: the check finds it.
	if err := f.admin.Exec(ctxT(t), "UPDATE "+f.prefix+"lease SET session_id = NULL WHERE name = 'late'"); err != nil {
		t.Fatal(err)
	}
	want("after the lease was freed by hand", map[string]uint64{"late": 7}, []string{"late"}, []string{"late"}, nil)
}
