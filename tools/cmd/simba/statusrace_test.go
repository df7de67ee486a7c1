package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// gatedScheme opens the in-process store of memory://NAME through a
// backend whose sessions open only once the gate of NAME is open.
const gatedScheme = "gated"

// gates holds the gate of each store name, a chan struct{}.
var gates sync.Map

type gatedBackend struct {
	simba.OpenedBackend
	gate chan struct{}
}

func (g gatedBackend) OpenSession(ctx context.Context, d time.Duration) (simba.SessionGrant, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return simba.SessionGrant{}, ctx.Err()
	}
	return g.OpenedBackend.OpenSession(ctx, d)
}

func init() {
	simba.RegisterBackend(gatedScheme, func(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
		name := strings.TrimPrefix(rawURL, gatedScheme+"://")
		b, err := openBackend(ctx, "memory://"+name, backendOptions{})
		if err != nil {
			return nil, err
		}
		gate, _ := gates.LoadOrStore(name, make(chan struct{}))
		return gatedBackend{b, gate.(chan struct{})}, nil
	})
}

// TestStatusCodeFitsTheSnapshotPrinted: a session that opens after
// --timeout ran out but before the snapshot is taken shows as LIVE, and
// status then exits 0 without saying that no session opened, instead of
// printing LIVE and exiting 69.
func TestStatusCodeFitsTheSnapshotPrinted(t *testing.T) {
	name := strings.TrimPrefix(memoryURL(t), "memory://")
	gate := make(chan struct{})
	gates.Store(name, gate)
	t.Cleanup(func() { gates.Delete(name) })
	statusWaited = func(c *simba.Client) {
		close(gate) // the timer fired: the session opens now
		deadline := time.Now().Add(10 * time.Second)
		for c.Snapshot().Session.Status != simba.StatusLive && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	t.Cleanup(func() { statusWaited = nil })
	r := runSimba(t, "status", "--backend", gatedScheme+"://"+name, "--timeout", "1ms")
	if !strings.Contains(r.stdout, "status:     LIVE\n") {
		t.Fatalf("the session did not open: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if r.code != exitOK || r.stderr != "" {
		t.Errorf("printed LIVE, then exit code %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
}
