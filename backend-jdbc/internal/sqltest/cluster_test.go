package sqltest

import (
	"context"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
	"github.com/simba-go/simba/core/fencingtest"
)

// testConformance runs the backend conformance suite. Every simulated node
// opens its own connection pool through Open, on tables of a prefix unique
// to the test. The sweep checks hold the floor row or a lease row in a
// transaction of the test's own, see the calls wait for it on the server,
// and backdate lease rows instead of waiting for them to become idle. The
// fences and the checks of connections (a silent server, passwords in
// errors) run only where the harness picks no tests (Only): the isolation
// and TLS runs are not their subject, and a fence's write at a default
// level above READ COMMITTED may fail with a serialization error.
func testConformance(t *testing.T, f *fixture) {
	h := backendtest.Harness{
		Lease: 2 * time.Second,
		New:   func(tb testing.TB) simba.Backend { return f.open(tb) },
		Hold: func(tb testing.TB, name string) func() {
			commit := f.holdFloor
			if name != "" {
				commit = func(tb testing.TB) func() error { return f.lockLease(tb, name) }
			}
			release := commit(tb)
			return func() { _ = release() }
		},
		Waiting: func(tb testing.TB) int { return int(f.lockWaits(tb)) },
		Age: func(tb testing.TB, name string, d time.Duration) {
			q := "UPDATE " + f.prefix + "lease SET acquired_at = " + f.h.Later(-int(d/time.Second)-1) + " WHERE name = ?"
			if err := f.admin.Exec(ctxT(tb), q, name); err != nil {
				tb.Fatalf("backdate %q: %v", name, err)
			}
		},
		ErrClosed: f.h.Pkg.ErrClosed,
		Expire:    func(tb testing.TB, id simba.SessionID) { f.expireIn(tb, id) },
		Stored: func(tb testing.TB, name string) bool {
			var n int64
			if err := f.admin.Scan(ctxT(tb), "SELECT count(*) FROM "+f.prefix+"lease WHERE name = ?", []any{name}, &n); err != nil {
				tb.Fatalf("count the rows of %q: %v", name, err)
			}
			return n > 0
		},
	}
	if f.h.Only != nil {
		backendtest.Run(t, h)
		return
	}
	for _, c := range f.h.Fences {
		tables := map[testing.TB]*fenceFixture{} // a table for each check
		h.Fences = append(h.Fences, backendtest.Fence{Name: c.Name, New: func(tb testing.TB) fencingtest.Resource {
			x := tables[tb]
			if x == nil {
				x = newFenceFixture(tb, f, c)
				tables[tb] = x
			}
			conn, err := c.Open(f.raw, x.table)
			if err != nil {
				tb.Fatalf("open %s: %v", c.Name, err)
			}
			return &fenceResource{x: x, conn: conn, key: x.newKey(tb)}
		}})
	}
	h.Secrets = f.secretCases
	h.Silent = func(ctx context.Context, tb testing.TB) (simba.Backend, error) {
		return f.h.Open(ctx, f.h.URL(tb, f.raw, backendtest.SilentListener(tb)), OpenOptions{Options: f.options()})
	}
	h.Silenced = func(tb testing.TB) (simba.Backend, func()) {
		p := backendtest.NewProxy(tb, f.h.Addr(tb, f.raw))
		b, err := f.h.Open(ctxT(tb), f.h.URL(tb, f.raw, p.Addr()), OpenOptions{Options: f.options()})
		if err != nil {
			tb.Fatalf("Open through the proxy: %v", err)
		}
		tb.Cleanup(func() { _ = b.Close() })
		return b, p.Silence
	}
	backendtest.Run(t, h)
}
