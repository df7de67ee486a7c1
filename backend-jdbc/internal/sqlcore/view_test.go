package sqlcore

import (
	"database/sql"
	"maps"
	"slices"
	"testing"

	simba "github.com/simba-go/simba/core"
)

func TestViewFoldsChangesInGenerationOrder(t *testing.T) {
	var v views
	const s = simba.SessionID("s")
	v.open(s)
	// Replies arrive out of order: 2 waits for 1.
	v.change(s, 2, leaseOp{name: "b", token: 4, acquire: true})
	if got, lag, _ := v.known(s); got != 0 || lag != 1 {
		t.Fatalf("known = %d, lag %d after a change that skips one, want 0, 1", got, lag)
	}
	// A keep-alive meanwhile lists the change already replied.
	if got, want := v.reply(s, 0, nil), map[string]uint64{"b": 4}; !maps.Equal(got, want) {
		t.Fatalf("leases with a change waiting = %v, want %v", got, want)
	}
	v.change(s, 1, leaseOp{name: "a", token: 7, acquire: true})
	if got, _, _ := v.known(s); got != 2 {
		t.Fatalf("known = %d, want 2", got)
	}
	first := v.reply(s, 2, nil)
	if want := map[string]uint64{"a": 7, "b": 4}; !maps.Equal(first, want) {
		t.Fatalf("leases = %v, want %v", first, want)
	}
	// A release of another token changes nothing; of the held one, frees it.
	v.change(s, 3, leaseOp{name: "a", token: 6})
	v.change(s, 4, leaseOp{name: "b", token: 4})
	if want := map[string]uint64{"a": 7, "b": 4}; !maps.Equal(first, want) {
		t.Fatalf("a reply's map changed afterwards: %v", first)
	}
	if got, want := v.reply(s, 4, nil), map[string]uint64{"a": 7}; !maps.Equal(got, want) {
		t.Fatalf("leases = %v, want %v", got, want)
	}
	// A listing newer than the view replaces it; changes past it stay.
	v.change(s, 6, leaseOp{name: "c", token: 1, acquire: true})
	if got, want := v.reply(s, 5, map[string]uint64{"z": 9}), map[string]uint64{"z": 9, "c": 1}; !maps.Equal(got, want) {
		t.Fatalf("leases after a listing = %v, want %v", got, want)
	}
	// An outcome unknown: the next keep-alive asks for the list.
	v.unsure(s)
	if got, _, _ := v.known(s); got != unknownGen {
		t.Fatalf("known = %d after unsure, want %d", got, unknownGen)
	}
	if got, want := v.reply(s, 6, map[string]uint64{"c": 1}), map[string]uint64{"c": 1}; !maps.Equal(got, want) {
		t.Fatalf("leases = %v, want %v", got, want)
	}
	v.drop(s)
	if got, _, _ := v.known(s); got != unknownGen {
		t.Fatalf("known = %d after drop, want %d", got, unknownGen)
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
	rows := [][3]any{{int32(0), nil, int64(1000)}, {int32(3), nil, int64(5)}, {int32(1), "a", int64(2)}, {int32(1), "b", int64(3)}}
	reply, gen, _, live, err := ReadKeepAlive(&fakeRows{rows: append(slices.Clone(rows), [3]any{int32(4), nil, int64(2)})})
	if err != nil || !live || gen != 5 || len(reply.Leases) != 2 {
		t.Fatalf("complete reply: %+v, gen %d, live %v, %v", reply, gen, live, err)
	}
	if _, _, _, _, err := ReadKeepAlive(&fakeRows{rows: append(slices.Clone(rows), [3]any{int32(4), nil, int64(3)})}); err == nil {
		t.Fatal("a reply with 2 of 3 leases was accepted")
	}
}
