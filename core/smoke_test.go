package simba_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

func TestSmokeElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		c1 := newClient(t, s.Connect())
		c2 := newClient(t, s.Connect())
		r1, r2 := newRecorder(), newRecorder()
		if err := c1.Election("leader").Start(r1); err != nil {
			t.Fatal(err)
		}
		t1 := r1.elected(t, time.Second)
		if err := c2.Election("leader").Start(r2); err != nil {
			t.Fatal(err)
		}
		r2.quiet(t, 5*time.Second)
		if err := c1.Election("leader").Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		r1.revoked(t, time.Second, simba.Stopped)
		t2 := r2.elected(t, time.Second)
		if t2.Token() <= t1.Token() {
			t.Fatalf("token %d after %d", t2.Token(), t1.Token())
		}
		lt, err := c1.Lock("x").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := lt.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
