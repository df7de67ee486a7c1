package simbazk

import (
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestConformance runs the backend conformance suite on the real server:
// every node is a Backend of its own, all under one root.
func TestConformance(t *testing.T) {
	servers := testServers(t, "SIMBA_TEST_ZK_SERVERS")
	root := testRoot(t, servers)
	backendtest.Run(t, backendtest.Harness{
		New: func(t testing.TB) simba.Backend {
			b, err := New(servers, Options{Root: root, Logger: quiet()})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		Lease: 2 * time.Second,
	})
}
