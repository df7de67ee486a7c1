package simba_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// boundedBackend is a backend that accepts leases up to max only.
type boundedBackend struct {
	simba.Backend
	max time.Duration
}

func (b boundedBackend) MaxLeaseDuration() time.Duration { return b.max }

// TestNewRefusesLeaseAboveBackendMaximum: a lease the backend would refuse
// at every OpenSession is a *ConfigError of New, not a client that never
// opens a session.
func TestNewRefusesLeaseAboveBackendMaximum(t *testing.T) {
	tests := []struct {
		name  string
		max   time.Duration
		lease time.Duration
		ok    bool
	}{
		{"at the maximum", 24 * time.Hour, 24 * time.Hour, true},
		{"below", 24 * time.Hour, time.Hour, true},
		{"default lease", 24 * time.Hour, 0, true},
		{"above", 24 * time.Hour, 24*time.Hour + time.Millisecond, false},
		{"far above", time.Minute, 1000 * time.Hour, false},
		{"no bound", 0, 1000 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := boundedBackend{Backend: memory.New(), max: tt.max}
			c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: tt.lease}))
			if tt.ok {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := c.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *simba.ConfigError
			if !errors.As(err, &ce) || ce.Field != "LeaseDuration" || !errors.Is(err, simba.ErrInvalidConfig) {
				if c != nil {
					_ = c.Close(context.Background())
				}
				t.Fatalf("New = %v, want a *ConfigError about LeaseDuration", err)
			}
			if !strings.Contains(ce.Reason, tt.max.String()) {
				t.Errorf("reason %q does not name the backend's maximum %v", ce.Reason, tt.max)
			}
		})
	}
}
