package backendtest_test

import (
	"testing"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
	"github.com/simba-go/simba/core/memory"
)

// A backend package runs the suite from one of its tests. Each call of New
// is one node; all nodes share the store under test. Backends over a
// network leave Synctest false and read their server's address from the
// environment.
func ExampleRun() {
	testConformance := func(t *testing.T) {
		srv := memory.New()
		backendtest.Run(t, backendtest.Harness{
			New:      func(testing.TB) simba.Backend { return srv.Connect() },
			Synctest: true,
		})
	}
	_ = testConformance // in a _test.go file: func TestConformance(t *testing.T)
}
