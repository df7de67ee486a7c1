package sqlcore

import (
	"maps"
	"testing"

	simba "github.com/simba-go/simba/core"
)

func TestViewFoldsChangesInGenerationOrder(t *testing.T) {
	var v views
	const s = simba.SessionID("s")
	v.open(s)
	// Replies arrive out of order: 2 waits for 1.
	v.change(s, 2, leaseOp{name: "b", token: 4, acquire: true})
	if got := v.known(s); got != 0 {
		t.Fatalf("known = %d after a change that skips one, want 0", got)
	}
	v.change(s, 1, leaseOp{name: "a", token: 7, acquire: true})
	if got := v.known(s); got != 2 {
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
	if got := v.known(s); got != unknownGen {
		t.Fatalf("known = %d after unsure, want %d", got, unknownGen)
	}
	if got, want := v.reply(s, 6, map[string]uint64{"c": 1}), map[string]uint64{"c": 1}; !maps.Equal(got, want) {
		t.Fatalf("leases = %v, want %v", got, want)
	}
	v.drop(s)
	if got := v.known(s); got != unknownGen {
		t.Fatalf("known = %d after drop, want %d", got, unknownGen)
	}
}
