package simbapg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backend-jdbc/internal/sqltest"
	simba "github.com/simba-go/simba/core"
)

// TestLeaseAboveMaximumIsAConfigError: a client whose lease the backend
// would refuse at every OpenSession is refused by simba.New, with a
// *simba.ConfigError, rather than created with no session ever open.
func TestLeaseAboveMaximumIsAConfigError(t *testing.T) {
	b, err := New(newPool(t, sqltest.ServerEnv(t, "SIMBA_TEST_POSTGRES_URL"), 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for _, lease := range []time.Duration{MaxLease + time.Millisecond, 25 * time.Hour, 1000 * time.Hour} {
		c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: lease}))
		var ce *simba.ConfigError
		if !errors.As(err, &ce) || ce.Field != "LeaseDuration" {
			if c != nil {
				_ = c.Close(context.Background())
			}
			t.Errorf("lease %v: simba.New = %v, want a *simba.ConfigError about LeaseDuration", lease, err)
		}
	}
	c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: MaxLease}))
	if err != nil {
		t.Fatalf("lease %v: %v", MaxLease, err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
