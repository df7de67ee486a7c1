package broken_test

import (
	"context"
	"errors"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/tools/chaos/internal/broken"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWrapRefusesUnknownMode(t *testing.T) {
	conn := memory.New().Connect()
	defer conn.Close()
	if _, err := broken.Wrap(conn, "nonsense"); !errors.Is(err, broken.ErrUnknownMode) {
		t.Fatalf("Wrap(nonsense) = %v, want ErrUnknownMode", err)
	}
	b, err := broken.Wrap(conn, broken.None)
	if err != nil || b != simba.OpenedBackend(conn) {
		t.Fatalf("Wrap(None) = %v, %v, want the backend itself", b, err)
	}
}

func TestMarginInflatesTheGrant(t *testing.T) {
	conn := memory.New().Connect()
	b, err := broken.Wrap(conn, broken.Margin)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, ok := b.(simba.ReleaseNotifier); !ok {
		t.Error("the wrapper hides the memory backend's release notifier")
	}
	g, err := b.OpenSession(t.Context(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if g.Remaining <= time.Second {
		t.Errorf("granted %v, want more than the 1s the backend gave", g.Remaining)
	}
}

func TestReviveAnswersForAnExpiredSession(t *testing.T) {
	conn := memory.New().Connect()
	b, err := broken.Wrap(conn, broken.Revive)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	g, err := b.OpenSession(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	won, err := b.Acquire(ctx, g.ID, "x")
	if err != nil || !won.Won {
		t.Fatalf("Acquire = %+v, %v", won, err)
	}
	req := simba.KeepAliveRequest{Lease: time.Second, Held: map[string]uint64{"x": won.Token}}
	if _, err := b.KeepAlive(ctx, g.ID, req); err != nil {
		t.Fatal(err)
	}
	if err := conn.CloseSession(ctx, g.ID); err != nil { // behind the wrapper's back
		t.Fatal(err)
	}
	r, err := b.KeepAlive(ctx, g.ID, req)
	if err != nil || len(r.Lost) != 0 {
		t.Fatalf("KeepAlive of the closed session = %+v, %v; want a revived reply that keeps x", r, err)
	}
}

func TestReleaseFreesTheNewerTerm(t *testing.T) {
	conn := memory.New().Connect()
	b, err := broken.Wrap(conn, broken.Release)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.Acquire(ctx, g.ID, "x")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Acquire(ctx, g.ID, "x")
	if err != nil || second.Token <= first.Token {
		t.Fatalf("second Acquire = %+v, %v", second, err)
	}
	if err := b.Release(ctx, g.ID, "x", first.Token); err != nil {
		t.Fatal(err)
	}
	r, err := conn.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: 5 * time.Second, Unsure: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, held := r.Owned["x"]; held {
		t.Error("the late release of the first term left the second in place: the bug is not there")
	}
}
