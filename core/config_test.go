package simba_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// R-CFG-1
func TestDefaultConfig(t *testing.T) {
	c := simba.DefaultConfig()
	want := simba.Config{LeaseDuration: 15 * time.Second, RenewInterval: 5 * time.Second, Drift: 0.01,
		Margin: 50 * time.Millisecond, RetryJitter: 2500 * time.Millisecond, MinBackoff: 100 * time.Millisecond}
	if c != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// R-CFG-2..4
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		give  simba.Config
		field string // "" when valid
		bound string
	}{
		{"defaults", simba.Config{}, "", ""},
		{"renew half the lease", simba.Config{LeaseDuration: 10 * time.Second, RenewInterval: 5 * time.Second}, "", ""},
		{"renew over half", simba.Config{LeaseDuration: 10 * time.Second, RenewInterval: 5001 * time.Millisecond}, "RenewInterval", "two keep-alives must fit"},
		{"margin eats the lease", simba.Config{LeaseDuration: 10 * time.Second, RenewInterval: 5 * time.Second, Margin: 5 * time.Second}, "LeaseDuration", "must exceed RenewInterval"},
		{"drift 0.5", simba.Config{Drift: 0.5}, "Drift", "[0, 0.5)"},
		{"drift negative", simba.Config{Drift: -0.1}, "Drift", "[0, 0.5)"},
		{"drift NaN", simba.Config{Drift: math.NaN()}, "Drift", "[0, 0.5)"},
		{"negative lease", simba.Config{LeaseDuration: -time.Second}, "LeaseDuration", "negative"},
		{"negative renew", simba.Config{RenewInterval: -time.Second}, "RenewInterval", "negative"},
		{"negative margin", simba.Config{Margin: -time.Second}, "Margin", "negative"},
		{"negative jitter", simba.Config{RetryJitter: -time.Second}, "RetryJitter", "negative"},
		{"negative backoff", simba.Config{MinBackoff: -time.Second}, "MinBackoff", "negative"},
		{"zero drift and margin", simba.Config{NoDrift: true, NoMargin: true}, "", ""},
		{"tiny lease", simba.Config{LeaseDuration: 2 * time.Nanosecond, NoDrift: true, NoMargin: true}, "LeaseDuration", "at least 3ms"},
		{"lease below the minimum", simba.Config{LeaseDuration: 2999 * time.Microsecond, RenewInterval: time.Millisecond, NoDrift: true, NoMargin: true}, "LeaseDuration", "at least 3ms"},
		{"smallest lease", simba.Config{LeaseDuration: simba.MinLeaseDuration, NoDrift: true, NoMargin: true}, "", ""},
		{"renew below the minimum", simba.Config{LeaseDuration: time.Second, RenewInterval: 999 * time.Microsecond}, "RenewInterval", "at least 1ms"},
		{"smallest renew", simba.Config{LeaseDuration: time.Second, RenewInterval: simba.MinRenewInterval}, "", ""},
		{"tiny backoff", simba.Config{MinBackoff: time.Nanosecond}, "MinBackoff", "at least 1ms"},
		{"backoff below the minimum", simba.Config{MinBackoff: 999 * time.Microsecond}, "MinBackoff", "at least 1ms"},
		{"smallest backoff", simba.Config{MinBackoff: simba.MinRenewInterval}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *simba.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, simba.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want a *ConfigError", err)
			}
			if ce.Field != tt.field || !strings.Contains(err.Error(), tt.bound) {
				t.Fatalf("Validate() = %q (field %s), want field %s naming %q", err, ce.Field, tt.field, tt.bound)
			}
		})
	}
}

// R-CFG-5: a variant is a copy; the original is never touched.
func TestConfigVariant(t *testing.T) {
	base := simba.DefaultConfig()
	v := base
	v.LeaseDuration = 30 * time.Second
	v.RenewInterval = 10 * time.Second
	if base.LeaseDuration != 15*time.Second || v.Validate() != nil {
		t.Fatalf("base %+v variant %+v", base, v)
	}
}

func FuzzConfig(f *testing.F) {
	f.Add(int64(15e9), int64(5e9), 0.01, int64(50e6), int64(0), int64(0))
	f.Add(int64(-1), int64(0), 0.6, int64(0), int64(-5), int64(1))
	f.Fuzz(func(t *testing.T, lease, renew int64, drift float64, margin, jitter, backoff int64) {
		c := simba.Config{LeaseDuration: time.Duration(lease), RenewInterval: time.Duration(renew), Drift: drift,
			Margin: time.Duration(margin), RetryJitter: time.Duration(jitter), MinBackoff: time.Duration(backoff)}
		err := c.Validate()
		if err != nil {
			if !errors.Is(err, simba.ErrInvalidConfig) {
				t.Fatalf("error %v is not ErrInvalidConfig", err)
			}
			return
		}
		if lease < 0 || renew < 0 || margin < 0 || jitter < 0 || backoff < 0 || !(drift >= 0 && drift < 0.5) {
			t.Fatalf("accepted %+v", c)
		}
		if r := c.Resolved(); r.LeaseDuration < simba.MinLeaseDuration || r.RenewInterval < simba.MinRenewInterval || r.MinBackoff < simba.MinRenewInterval {
			t.Fatalf("accepted %+v, which resolves to a lease of %v renewed every %v, backoff %v", c, r.LeaseDuration, r.RenewInterval, r.MinBackoff)
		}
	})
}
