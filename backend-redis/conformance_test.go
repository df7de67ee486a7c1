package simbaredis

import (
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestConformance runs the backend conformance suite on the real server;
// every simulated node is its own Backend and connection, all under one
// key prefix.
func TestConformance(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	t.Cleanup(func() { deleteKeys(t, rawClient(t, url), prefix) })
	backendtest.Run(t, backendtest.Harness{
		New: func(t testing.TB) simba.Backend {
			return openBackend(t, url, Options{KeyPrefix: prefix})
		},
		Lease:         2 * time.Second,
		ListUnordered: true,
	})
}
