package simbapg

import (
	"testing"

	"github.com/simba-go/simba/core/backendtest"
)

// TestLeaseAboveMaximumIsAConfigError: a client whose lease the backend
// would refuse at every OpenSession is refused by simba.New, with a
// *simba.ConfigError, rather than created with no session ever open.
func TestLeaseAboveMaximumIsAConfigError(t *testing.T) {
	b, err := New(newPool(t, backendtest.ServerEnv(t, "SIMBA_TEST_POSTGRES_URL"), 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	backendtest.LeaseAboveMaximumIsAConfigError(t, b, MaxLease)
}
