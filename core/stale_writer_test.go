package simba_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/fencing"
	"github.com/simba-go/simba/core/memory"
)

// R-FEN-1, end to end: node A holds a term and is paused past its
// deadline; node B wins a newer term and writes; A wakes and its write with
// the old token is rejected by the fenced resource.
func TestStaleWriterRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		connA := s.Connect()
		a := newClient(t, connA)
		b := newClient(t, s.Connect())
		var ledger fencing.Value[string]

		ta, err := a.Lock("ledger").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ledger.Write(ta.Token(), "A: batch 1") {
			t.Fatal("first write rejected")
		}
		connA.Stall() // A is paused: no keep-alive gets through
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tb, err := b.Lock("ledger").Acquire(ctx) // B takes over once A's session expired
		if err != nil {
			t.Fatal(err)
		}
		if tb.Token() <= ta.Token() {
			t.Fatalf("B's token %d not above A's %d", tb.Token(), ta.Token())
		}
		if ta.Valid() {
			t.Fatal("A's term still valid while B holds a newer one")
		}
		if !ledger.Write(tb.Token(), "B: batch 2") {
			t.Fatal("B's write rejected")
		}
		// A wakes up and finishes the write it had started, with its old token.
		if ledger.Write(ta.Token(), "A: late batch") {
			t.Fatal("the stale write of A was accepted")
		}
		if v, tok := ledger.Load(); v != "B: batch 2" || tok != tb.Token() {
			t.Fatalf("ledger = %q at token %d", v, tok)
		}
		connA.Unstall()
		synctest.Wait() // A's session loop ends the session at the same instant B won
		if ta.Reason() != simba.DeadlinePassed {
			t.Fatalf("A's term ended with %v, want DEADLINE_PASSED", ta.Reason())
		}
	})
}
