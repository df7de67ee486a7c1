package sqlcore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// ownerDialect answers a keep-alive with the tokens of owns, and records
// the names each one looked up.
type ownerDialect struct {
	fakeDialect
	owns   map[string]uint64
	looked *[][]string
}

func (d ownerDialect) KeepAlive(_ context.Context, _ string, _ time.Duration, names []string) (simba.KeepAliveReply, map[string]uint64, bool, error) {
	*d.looked = append(*d.looked, slices.Clone(names))
	tokens := map[string]uint64{}
	for _, n := range names {
		if tok, ok := d.owns[n]; ok {
			tokens[n] = tok
		}
	}
	return simba.KeepAliveReply{Remaining: time.Second}, tokens, true, nil
}

// TestKeepAliveChecksAFewOfTheHeld: with many leases held, a keep-alive
// looks up MinLeaseChecks of them and the unsure names, not every one;
// which ones varies, so every lease is checked in time. A checked lease
// that the session no longer owns at the held token is lost; an unsure
// name it owns is owned.
func TestKeepAliveChecksAFewOfTheHeld(t *testing.T) {
	var looked [][]string
	held := map[string]uint64{}
	for i := range 200 {
		held[fmt.Sprintf("n%d", i)] = uint64(i + 1)
	}
	owns := maps.Clone(held)
	owns["n7"] = 99 // taken again at another token
	delete(owns, "n8")
	owns["orphan"] = 5
	b := newFake(t, fakeDialect{})
	b.d = ownerDialect{owns: owns, looked: &looked}
	s, err := b.OpenSession(t.Context(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req := simba.KeepAliveRequest{Lease: time.Second, Held: held, Unsure: []string{"orphan", "gone", "n3"}}
	seen, lost := map[string]bool{}, map[string]bool{}
	for range 400 {
		r, err := b.KeepAlive(t.Context(), s.ID, req)
		if err != nil {
			t.Fatal(err)
		}
		names := looked[len(looked)-1]
		if n := len(names); n > simba.MinLeaseChecks+len(req.Unsure) {
			t.Fatalf("a keep-alive looked up %d names, want at most %d", n, simba.MinLeaseChecks+len(req.Unsure))
		}
		for _, n := range names {
			seen[n] = true
		}
		if want := map[string]uint64{"orphan": 5, "n3": 4}; !maps.Equal(r.Owned, want) {
			t.Fatalf("Owned = %v, want %v", r.Owned, want)
		}
		for _, n := range r.Lost {
			if n != "n7" && n != "n8" {
				t.Fatalf("Lost %q, which the session owns at the held token", n)
			}
			lost[n] = true
		}
	}
	if len(seen) < len(held) {
		t.Errorf("400 keep-alives checked %d of %d held leases", len(seen), len(held))
	}
	if !lost["n7"] || !lost["n8"] {
		t.Errorf("lost = %v, want n7 and n8 reported", lost)
	}
}

// TestKeepAliveChecksEveryHeldWhenFew: with MinLeaseChecks leases held or
// fewer, every keep-alive checks them all; an invalid name, which no
// acquire takes, is lost without a look-up.
func TestKeepAliveChecksEveryHeldWhenFew(t *testing.T) {
	var looked [][]string
	held := map[string]uint64{"a": 1, "b": 2, "c": 3, "d": 4, strings.Repeat("x", 200): 5}
	b := newFake(t, fakeDialect{})
	b.d = ownerDialect{owns: map[string]uint64{"a": 1, "b": 2, "c": 3, "d": 4}, looked: &looked}
	s, err := b.OpenSession(t.Context(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.KeepAlive(t.Context(), s.ID, simba.KeepAliveRequest{Lease: time.Second, Held: held})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(looked[0])
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(looked[0], want) {
		t.Fatalf("looked up %v, want %v", looked[0], want)
	}
	if len(r.Lost) != 1 || len(r.Lost[0]) != 200 || r.Owned != nil {
		t.Fatalf("reply %+v, want the invalid name lost and nothing owned", r)
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
	*dest[1].(*sql.NullString) = sql.NullString{}
	if row[1] != nil {
		*dest[1].(*sql.NullString) = sql.NullString{String: row[1].(string), Valid: true}
	}
	*dest[2].(*int64) = row[2].(int64)
	return nil
}
func (r *fakeRows) Err() error { return nil }
func (r *fakeRows) Close()     {}

// TestReadKeepAliveRefusesAShortReply: a reply that answers fewer names
// than were asked is an error, never a lease reported lost.
func TestReadKeepAliveRefusesAShortReply(t *testing.T) {
	rows := [][3]any{{int32(0), nil, int64(1000)}, {int32(1), "a", int64(2)}, {int32(1), "b", int64(0)}, {int32(2), "g", int64(3)}}
	reply, tokens, live, err := ReadKeepAlive(&fakeRows{rows: rows}, 2)
	if err != nil || !live || !maps.Equal(tokens, map[string]uint64{"a": 2}) || reply.Groups["g"] != 3 || reply.Remaining != time.Millisecond {
		t.Fatalf("complete reply: %+v, tokens %v, live %v, %v", reply, tokens, live, err)
	}
	if _, _, _, err := ReadKeepAlive(&fakeRows{rows: rows}, 3); err == nil {
		t.Fatal("a reply to 2 of 3 names was accepted")
	}
	if _, _, live, err := ReadKeepAlive(&fakeRows{}, 3); err != nil || live {
		t.Fatalf("no rows: live %v, %v; want not live", live, err)
	}
}
