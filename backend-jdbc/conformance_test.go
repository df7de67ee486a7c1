package simbasql

import (
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestConformance runs the backend conformance suite on each real server.
// Every simulated node opens its own connection pool through Open, on
// tables of a prefix unique to the run.
func TestConformance(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		var once sync.Once
		backendtest.Run(t, backendtest.Harness{
			Lease: 2 * time.Second,
			New: func(tb testing.TB) simba.Backend {
				tb.Helper()
				b, err := Open(ctxT(tb), f.openURL(), Options{TablePrefix: f.prefix, Migrate: true})
				if err != nil {
					tb.Fatalf("Open: %v", err)
				}
				once.Do(func() { tb.Logf("%s: tables %s*", f.dialect, f.prefix) })
				tb.Cleanup(func() { b.Close() })
				return b
			},
		})
	})
}
