package memory_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
	"github.com/simba-go/simba/core/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	t.Run("Conn", func(t *testing.T) {
		srv := memory.New()
		backendtest.Run(t, backendtest.Harness{
			New:      func(testing.TB) simba.Backend { return srv.Connect() },
			Synctest: true,
		})
	})
	t.Run("Server", func(t *testing.T) {
		srv := memory.New()
		backendtest.Run(t, backendtest.Harness{
			New:      func(testing.TB) simba.Backend { return srv },
			Synctest: true,
		})
	})
}

// TestConformanceRealTime runs the suite on the real clock, as users'
// tests outside synctest do.
func TestConformanceRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for real expiries")
	}
	srv := memory.New()
	backendtest.Run(t, backendtest.Harness{
		New:   func(testing.TB) simba.Backend { return srv.Connect() },
		Lease: 500 * time.Millisecond,
	})
}
