package memory_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// term is the owner and token of the watched lease.
type term struct {
	id    simba.SessionID
	token uint64
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWatchRelease(t *testing.T) {
	// Each case makes "job" owned by a live session, watches it through
	// another connection, then does something to the store.
	tests := []struct {
		give string
		do   func(t *testing.T, srv *memory.Server, owner term)
		want bool // whether the watch fires
	}{
		{"release", func(t *testing.T, srv *memory.Server, o term) {
			if err := srv.Release(t.Context(), o.id, "job", o.token); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"release with a stale token", func(t *testing.T, srv *memory.Server, o term) {
			if err := srv.Release(t.Context(), o.id, "job", o.token-1); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"owner closed", func(t *testing.T, srv *memory.Server, o term) {
			if err := srv.CloseSession(t.Context(), o.id); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"owner expired by the server", func(t *testing.T, srv *memory.Server, o term) {
			srv.ExpireSession(o.id)
		}, true},
		{"owner's lease ran out, noticed by a later call", func(t *testing.T, srv *memory.Server, o term) {
			time.Sleep(lease)
			srv.Sessions()
		}, true},
		{"owner's lease ran out, no call since", func(t *testing.T, srv *memory.Server, o term) {
			time.Sleep(lease)
		}, false},
		{"taken over", func(t *testing.T, srv *memory.Server, o term) {
			srv.TakeOver("job")
		}, false},
		{"owner keeps it", func(t *testing.T, srv *memory.Server, o term) {
			if _, err := srv.KeepAlive(t.Context(), o.id, simba.KeepAliveRequest{Lease: lease}); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := memory.New()
				owner := srv.Connect()
				id := open(t, owner)
				r, err := owner.Acquire(t.Context(), id, "job")
				if err != nil || !r.Won {
					t.Fatalf("Acquire = %+v, %v", r, err)
				}
				ch, err := srv.Connect().WatchRelease(t.Context(), "job")
				if err != nil {
					t.Fatal(err)
				}
				if closed(ch) {
					t.Fatal("watch of an owned lease fired at once")
				}
				tt.do(t, srv, term{id: id, token: r.Token})
				if got := closed(ch); got != tt.want {
					t.Fatalf("watch fired = %v, want %v", got, tt.want)
				}
			})
		})
	}
}

func TestWatchFreeLeaseFiresAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		c := srv.Connect()
		ch, err := c.WatchRelease(t.Context(), "never-owned")
		if err != nil || !closed(ch) {
			t.Fatalf("watch of a never owned lease: fired %v, err %v; want fired", closed(ch), err)
		}
		id := open(t, c)
		r, _ := c.Acquire(t.Context(), id, "job")
		if err := c.Release(t.Context(), id, "job", r.Token); err != nil {
			t.Fatal(err)
		}
		if ch, err := c.WatchRelease(t.Context(), "job"); err != nil || !closed(ch) {
			t.Fatalf("watch of a released lease: err %v; want fired", err)
		}
	})
}

func TestWatchDroppedWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		id := open(t, srv)
		if _, err := srv.Acquire(t.Context(), id, "job"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		for range 3 {
			if _, err := srv.WatchRelease(ctx, "job"); err != nil {
				t.Fatal(err)
			}
		}
		kept, err := srv.WatchRelease(t.Context(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if got := srv.Watchers(); got != 4 {
			t.Fatalf("Watchers = %d, want 4", got)
		}
		cancel()
		synctest.Wait()
		if got := srv.Watchers(); got != 1 {
			t.Fatalf("Watchers = %d after their context ended, want 1", got)
		}
		if err := srv.CloseSession(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if !closed(kept) || srv.Watchers() != 0 {
			t.Fatalf("after close: fired %v, %d watchers left; want fired, none left", closed(kept), srv.Watchers())
		}
	})
}

func TestWatchLostOnFaultyConn(t *testing.T) {
	faults := []struct {
		give string
		set  func(*memory.Conn)
	}{
		{"stalled", (*memory.Conn).Stall},
		{"failing", func(c *memory.Conn) { c.Fail(errBoom) }},
		{"dropping replies", func(c *memory.Conn) { c.DropReplies(true) }},
	}
	for _, f := range faults {
		t.Run(f.give, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := memory.New()
				id := open(t, srv)
				if _, err := srv.Acquire(t.Context(), id, "job"); err != nil {
					t.Fatal(err)
				}
				c := srv.Connect()
				ch, err := c.WatchRelease(t.Context(), "job")
				if err != nil {
					t.Fatal(err)
				}
				f.set(c)
				if err := srv.CloseSession(t.Context(), id); err != nil {
					t.Fatal(err)
				}
				if closed(ch) {
					t.Fatal("a release notification reached a cut-off connection")
				}
				if got := srv.Watchers(); got != 0 {
					t.Fatalf("Watchers = %d, want the lost watch dropped", got)
				}
			})
		})
	}
}
