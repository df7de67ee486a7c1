package sqlcore

import (
	"database/sql"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
)

// testLease is the lease the views of these tests are opened with: none,
// so that a call of unknown outcome makes only the next listing count
// (TestViewUnsureForALease covers the window a real lease gives).
const testLease time.Duration = 0

// keepAliveOf runs the view's side of a keep-alive of s that finds lost
// and, when the view asks for a listing, lists listed.
func keepAliveOf(v *views, s simba.SessionID, listed map[string]uint64, lost ...Check) (leases map[string]uint64, listedToo bool) {
	list, l, _ := v.keepAlive(s, testLease)
	if list {
		return v.reply(s, maps.Clone(listed), &l, nil), true
	}
	return v.reply(s, nil, nil, lost), false
}

// won opens s in v and applies the wins of tokens, name by name.
func won(v *views, s simba.SessionID, tokens map[string]uint64) {
	v.open(s, testLease)
	for name, tok := range tokens {
		v.change(s, leaseOp{name: name, token: tok, acquire: true})
	}
}

func TestViewAppliesRepliesByToken(t *testing.T) {
	var v views
	const s = simba.SessionID("s")
	won(&v, s, map[string]uint64{"a": 7, "b": 4})
	v.change(s, leaseOp{name: "a", token: 6, acquire: true}) // an older term replied late
	list, _, check := v.keepAlive(s, testLease)
	if list || len(check) != 2 {
		t.Fatalf("keepAlive = list %v, check %v; want no listing and both leases checked", list, check)
	}
	first := v.reply(s, nil, nil, nil)
	if want := map[string]uint64{"a": 7, "b": 4}; !maps.Equal(first, want) {
		t.Fatalf("leases = %v, want %v", first, want)
	}
	// A release of another token changes nothing; of the held one, frees it.
	v.change(s, leaseOp{name: "a", token: 6})
	v.change(s, leaseOp{name: "b", token: 4})
	if want := map[string]uint64{"a": 7, "b": 4}; !maps.Equal(first, want) {
		t.Fatalf("a reply's map changed afterwards: %v", first)
	}
	if got, listed := keepAliveOf(&v, s, nil); listed || !maps.Equal(got, map[string]uint64{"a": 7}) {
		t.Fatalf("leases = %v (listed %v), want a at 7 from the view", got, listed)
	}
}

func TestViewListsWhenUnknown(t *testing.T) {
	var v views
	const s = simba.SessionID("s")
	won(&v, s, map[string]uint64{"z": 9})
	// An outcome unknown: the next keep-alive lists, and the replies that
	// come while it is on its way are applied on top of its list.
	v.unsure(s)
	list, l, check := v.keepAlive(s, testLease)
	if !list || check != nil {
		t.Fatalf("keepAlive after unsure = list %v, check %v; want a listing", list, check)
	}
	v.change(s, leaseOp{name: "c", token: 1, acquire: true}) // after the snapshot
	v.change(s, leaseOp{name: "z", token: 9})                // after the snapshot
	v.change(s, leaseOp{name: "y", token: 2, acquire: true}) // before it: listed too
	got := v.reply(s, map[string]uint64{"z": 9, "y": 2, "late": 3}, &l, nil)
	if want := map[string]uint64{"y": 2, "c": 1, "late": 3}; !maps.Equal(got, want) {
		t.Fatalf("leases after a listing = %v, want %v", got, want)
	}
	if got, listed := keepAliveOf(&v, s, nil); listed || len(got) != 3 {
		t.Fatalf("keep-alive after a listing: %v (listed %v), want the view", got, listed)
	}

	// A call that fails while a listing is on its way: the list may
	// predate its outcome, so the view stays unknown.
	v.unsure(s)
	_, l, _ = v.keepAlive(s, testLease)
	v.unsure(s)
	v.reply(s, map[string]uint64{}, &l, nil)
	if got, listed := keepAliveOf(&v, s, map[string]uint64{"y": 2}); !listed || !maps.Equal(got, map[string]uint64{"y": 2}) {
		t.Fatalf("keep-alive after an unsure listing: %v (listed %v), want a listing", got, listed)
	}

	// A listing that failed leaves the view unknown.
	v.unsure(s)
	if list, _, _ := v.keepAlive(s, testLease); !list {
		t.Fatal("no listing after unsure")
	}
	v.abandon(s)
	if _, listed := keepAliveOf(&v, s, nil); !listed {
		t.Fatal("no listing after a listing failed")
	}
}

// A call of unknown outcome may commit after a listing's snapshot: the
// keep-alives sent within a lease of it list, and only one sent later
// makes the view known again.
func TestViewUnsureForALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var v views
		const s = simba.SessionID("s")
		v.open(s, 3*time.Second)
		v.unsure(s) // an acquire gave up; it may still win on the server
		for range 3 {
			time.Sleep(time.Second - time.Millisecond)
			if _, listed := keepAliveOf(&v, s, nil); !listed {
				t.Fatal("a keep-alive within a lease of the unknown outcome did not list")
			}
		}
		time.Sleep(time.Second)
		// The acquire committed after the listings above read.
		if got, listed := keepAliveOf(&v, s, map[string]uint64{"x": 1}); !listed || !maps.Equal(got, map[string]uint64{"x": 1}) {
			t.Fatalf("keep-alive a lease after: %v (listed %v), want the late win listed", got, listed)
		}
		if _, listed := keepAliveOf(&v, s, nil); listed {
			t.Fatal("still listing after a listing sent a lease after the unknown outcome")
		}
	})
}

func TestViewCheckFindsChangesItDidNotSee(t *testing.T) {
	var v views
	const s = simba.SessionID("s")
	won(&v, s, map[string]uint64{"a": 7, "b": 3})
	// The check found b at 2 gone: the view has b at 3, won since.
	if got, listed := keepAliveOf(&v, s, nil, Check{Name: "b", Token: 2}); listed || len(got) != 2 {
		t.Fatalf("leases = %v (listed %v), want both from the view", got, listed)
	}
	if list, _, _ := v.keepAlive(s, testLease); list {
		t.Fatal("a loss the replies explain made the view unknown")
	}
	v.reply(s, nil, nil, nil)
	// a at 7 gone, which no reply said: dropped, and the next keep-alive
	// lists every lease.
	if got, _ := keepAliveOf(&v, s, nil, Check{Name: "a", Token: 7}); !maps.Equal(got, map[string]uint64{"b": 3}) {
		t.Fatalf("leases = %v, want b at 3", got)
	}
	if got, listed := keepAliveOf(&v, s, map[string]uint64{"b": 3, "other": 1}); !listed || len(got) != 2 {
		t.Fatalf("keep-alive after a loss = %v (listed %v), want a listing", got, listed)
	}

	// A session this view did not open, or dropped, is listed.
	v.drop(s)
	if _, listed := keepAliveOf(&v, s, nil); !listed {
		t.Fatal("a dropped session was not listed")
	}
	if _, listed := keepAliveOf(&v, "never-opened", nil); !listed {
		t.Fatal("a session never opened was not listed")
	}
}

// fakeRows serves (kind, name, value) rows to ReadKeepAlive.
type fakeRows struct {
	rows [][3]any
	i    int
}

func (r *fakeRows) Next() bool { r.i++; return r.i <= len(r.rows) }
func (r *fakeRows) Scan(dest ...any) error {
	row := r.rows[r.i-1]
	*dest[0].(*int32) = row[0].(int32)
	if row[1] != nil {
		*dest[1].(*sql.NullString) = sql.NullString{String: row[1].(string), Valid: true}
	}
	*dest[2].(*int64) = row[2].(int64)
	return nil
}
func (r *fakeRows) Err() error { return nil }
func (r *fakeRows) Close()     {}

func TestReadKeepAliveRefusesAShortList(t *testing.T) {
	rows := [][3]any{{int32(0), nil, int64(1000)}, {int32(1), "a", int64(2)}, {int32(1), "b", int64(3)}}
	reply, _, live, err := ReadKeepAlive(&fakeRows{rows: append(slices.Clone(rows), [3]any{int32(4), nil, int64(2)})})
	if err != nil || !live || len(reply.Leases) != 2 {
		t.Fatalf("complete reply: %+v, live %v, %v", reply, live, err)
	}
	if _, _, _, err := ReadKeepAlive(&fakeRows{rows: append(slices.Clone(rows), [3]any{int32(4), nil, int64(3)})}); err == nil {
		t.Fatal("a reply with 2 of 3 leases was accepted")
	}
}

// A view whose session saw no call for two leases (expired on the server
// without a last keep-alive) goes when another session opens; a session
// kept alive keeps its view.
func TestViewsOfDeadSessionsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var v views
		v.open("dead", time.Second)
		v.open("live", time.Second)
		for range 3 {
			time.Sleep(time.Second)
			v.keepAlive("live", time.Second)
		}
		v.open("new", time.Second)
		if _, ok := v.m["dead"]; ok {
			t.Fatal("the view of a session silent for three leases is still kept")
		}
		for _, s := range []simba.SessionID{"live", "new"} {
			if _, ok := v.m[s]; !ok {
				t.Fatalf("the view of %s was dropped", s)
			}
		}
	})
}
