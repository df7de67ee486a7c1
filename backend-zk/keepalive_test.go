package simbazk

import (
	"testing"

	simba "github.com/simba-go/simba/core"
)

// TestReleaseAfterWatchedNodeReplaced: a lease node under the session's
// exists-watch is deleted by hand and another session creates the name;
// once the event reached the session (any later reply of its connection
// comes after it), a release of the old term reads the node first and
// leaves the other session's node alone, and the next keep-alive reports
// the lease lost.
func TestReleaseAfterWatchedNodeReplaced(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	s, c := mustOpen(t, b, lease), mustOpen(t, b, lease)
	tok := mustAcquire(t, b, s, "x").Token
	req := simba.KeepAliveRequest{Held: map[string]uint64{"x": tok}, Generation: 1}
	mustKeepAlive(t, b, s, req) // x is under an exists-watch from here on

	a := dialAdmin(t, servers)
	defer a.close()
	if err := a.conn.Delete(b.leasePath("x"), -1); err != nil {
		t.Fatalf("delete by hand: %v", err)
	}
	taken := mustAcquire(t, b, c, "x")
	if !taken.Won {
		t.Fatal("another session cannot take the lease deleted by hand")
	}
	ss, err := b.session(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ss.conn.Exists(b.leasesDir); err != nil { // the event is in before its reply
		t.Fatal(err)
	}
	if err := b.Release(ctx(t), s, "x", tok); err != nil {
		t.Fatalf("Release of the old term: %v", err)
	}
	if got := owned(t, b, c, "x"); got["x"] != taken.Token {
		t.Fatalf("after the old owner's release the new owner owns %v, want x:%d", got, taken.Token)
	}
	if lost := mustKeepAlive(t, b, s, req).Lost; len(lost) != 1 || lost[0] != "x" {
		t.Fatalf("KeepAlive lost %v, want x", lost)
	}
}

// TestKeepAliveUnsure: an unsure name is reported owned, at its token,
// when the session owns it, and not when another session does or nobody
// does; an unsure name whose node the session watches costs no request.
func TestKeepAliveUnsure(t *testing.T) {
	b, _ := newTestBackend(t, Options{})
	s, c := mustOpen(t, b, lease), mustOpen(t, b, lease)
	mine := mustAcquire(t, b, s, "mine").Token
	mustAcquire(t, b, c, "theirs")
	unsure := []string{"mine", "theirs", "nobody's"}
	before := requests(t, b, s)
	got := mustKeepAlive(t, b, s, simba.KeepAliveRequest{Unsure: unsure}).Owned
	if len(got) != 1 || got["mine"] != mine {
		t.Fatalf("KeepAlive owns %v of %v, want mine:%d", got, unsure, mine)
	}
	if sent := requests(t, b, s) - before; sent != 4 {
		t.Errorf("KeepAlive with 3 unsure names sent %d requests, want 4 (renewal, 3 exists)", sent)
	}
	before = requests(t, b, s)
	if got := mustKeepAlive(t, b, s, simba.KeepAliveRequest{Unsure: []string{"mine"}}).Owned; got["mine"] != mine {
		t.Fatalf("KeepAlive owns %v, want mine:%d", got, mine)
	}
	if sent := requests(t, b, s) - before; sent != 1 {
		t.Errorf("KeepAlive with an unsure name under watch sent %d requests, want 1", sent)
	}
}
