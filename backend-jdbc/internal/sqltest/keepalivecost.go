package sqltest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
)

// testKeepAliveCostFlat: when nothing changed, a keep-alive reads about
// as many rows with many leases held as with one. It counts the rows the
// server reads (Harness.RowsRead), not time, so it does not depend on the
// load of the machine.
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
		for i := range leases {
			acquire(t, b, s, fmt.Sprintf("n%d", i))
		}
		keepAlive(t, b, s, time.Minute)
		best := int64(-1)
		for range 3 {
			before, err := rows(ctxT(t))
			if err != nil {
				t.Fatalf("rows read: %v", err)
			}
			if got := keepAlive(t, b, s, time.Minute); len(got.Leases) != leases {
				t.Fatalf("keep-alive listed %d leases, want %d", len(got.Leases), leases)
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
	one, lots := perKeepAlive(1), perKeepAlive(many)
	t.Logf("rows read per keep-alive: %d with 1 lease, %d with %d", one, lots, many)
	if lots > 2*max(one, 1) {
		t.Fatalf("a keep-alive read %d rows with %d leases held, %d with 1: want at most twice as many", lots, many, one)
	}
}

// testKeepAliveSeesOtherChanges: a keep-alive replies with what its
// Backend's own replies said; it checks up to sqlcore.CheckedLeases leases
// of that view against their rows (every one here), so a lease freed
// through another Backend on the same session, or by hand, is gone from
// the next reply, and the keep-alive after it lists the session's leases,
// a lease won through another Backend included. An Acquire whose outcome
// is unknown (its context ended) makes the next keep-alive list them too.
func testKeepAliveSeesOtherChanges(t *testing.T, f *fixture) {
	b, other := f.backend(), f.backend()
	const lease = time.Minute
	s := open(t, b, lease)
	tok := acquire(t, b, s, "mine").Token
	want := func(what string, leases map[string]uint64) {
		t.Helper()
		got := keepAlive(t, b, s, lease).Leases
		if len(got) != len(leases) {
			t.Fatalf("%s: keep-alive lists %v, want %v", what, got, leases)
		}
		for n, tk := range leases {
			if got[n] != tk {
				t.Fatalf("%s: keep-alive lists %v, want %v", what, got, leases)
			}
		}
	}
	want("own acquire", map[string]uint64{"mine": tok})
	ot := acquire(t, other, s, "theirs").Token
	want("acquire through another Backend, which no reply of this one said", map[string]uint64{"mine": tok})
	if err := other.Release(ctxT(t), s, "mine", tok); err != nil {
		t.Fatal(err)
	}
	want("release through another Backend, found by the check", map[string]uint64{})
	want("the keep-alive after the check found a change lists", map[string]uint64{"theirs": ot})
	if err := b.Release(ctxT(t), s, "theirs", ot); err != nil {
		t.Fatal(err)
	}
	want("own release", map[string]uint64{})

	// An acquire cut short: the Backend cannot know whether it won, so
	// the next keep-alive lists the leases (the row below is written by
	// hand, as a win would be).
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if _, err := b.Acquire(ctx, s, "late"); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
	q := "INSERT INTO " + f.prefix + "lease (name, session_id, token, acquired_at) VALUES ('late', ?, 7, " + f.h.Later(0) + ")"
	if err := f.admin.Exec(ctxT(t), q, string(s)); err != nil {
		t.Fatal(err)
	}
	want("after an acquire cut short", map[string]uint64{"late": 7})

	// A lease freed by hand: the check finds it.
	if err := f.admin.Exec(ctxT(t), "UPDATE "+f.prefix+"lease SET session_id = NULL WHERE name = 'late'"); err != nil {
		t.Fatal(err)
	}
	want("after the lease was freed by hand", map[string]uint64{})
}
