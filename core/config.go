package simba

import (
	"errors"
	"fmt"
	"time"
)

// Default timing values (R-CFG-1).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultDrift         = 0.01
	DefaultMargin        = 50 * time.Millisecond
	DefaultMinBackoff    = 100 * time.Millisecond
)

// The shortest timing a Config accepts. A millisecond is the finest unit
// every backend stores a lease in and the shortest renew period the engine
// ever uses; below it a keep-alive loop would spin. MinLeaseDuration fits
// three keep-alives of MinRenewInterval, so the default renew interval of
// the shortest lease is the shortest allowed.
const (
	MinRenewInterval = time.Millisecond
	MinLeaseDuration = 3 * MinRenewInterval
)

// ErrInvalidConfig is matched (with errors.Is) by every *ConfigError.
var ErrInvalidConfig = errors.New("simba: invalid config")

// ConfigError reports a Config field that is out of bounds.
type ConfigError struct {
	Field  string // the Config field, e.g. "RenewInterval"
	Reason string // the value and the bound it breaks
}

func (e *ConfigError) Error() string { return "simba: config " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidConfig) true for every *ConfigError.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Config holds the session timing of a client. The zero value of a field
// means "use the default"; DefaultConfig returns every default filled in.
// Config is a plain value: copy it and change the copy to derive a variant
// (R-CFG-5); the original is never touched.
type Config struct {
	// LeaseDuration is how long the backend keeps the session after its
	// last keep-alive. It bounds failover after a crash. Default 15s; at
	// least MinLeaseDuration (3ms).
	LeaseDuration time.Duration

	// RenewInterval is the keep-alive period. Two keep-alives must fit in
	// LeaseDuration. Default LeaseDuration/3; at least MinRenewInterval
	// (1ms).
	RenewInterval time.Duration

	// Drift is the upper bound of the clock rate difference between this
	// node and the backend, in [0, 0.5). It shortens every local deadline
	// by that fraction. Default 0.01; set NoDrift for an exact zero.
	Drift float64

	// Margin is subtracted from every local deadline. Default 50ms; set
	// NoMargin for an exact zero.
	Margin time.Duration

	// RetryJitter is the upper bound of the random delay a candidate adds
	// to RenewInterval/2 between attempts. Default RenewInterval/2.
	RetryJitter time.Duration

	// MinBackoff is the shortest wait between keep-alive retries after a
	// failure, and the first wait between attempts to open a session.
	// Default 100ms; at least MinRenewInterval (1ms), so that a failing
	// backend is not called, and BackendError not emitted, thousands of
	// times a second.
	MinBackoff time.Duration

	// NoDrift and NoMargin make a zero Drift or Margin mean zero rather
	// than the default.
	NoDrift, NoMargin bool
}

// DefaultConfig returns the default timing: a 15s lease renewed every 5s.
func DefaultConfig() Config {
	return Config{}.withDefaults()
}

// withDefaults fills the zero fields with their defaults.
func (c Config) withDefaults() Config {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.LeaseDuration / 3
	}
	if c.Drift == 0 && !c.NoDrift {
		c.Drift = DefaultDrift
	}
	if c.Margin == 0 && !c.NoMargin {
		c.Margin = DefaultMargin
	}
	if c.RetryJitter == 0 {
		c.RetryJitter = c.RenewInterval / 2
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	return c
}

// Validate fills the defaults in a copy of c and checks the bounds of
// R-CFG-2..4 and the minimums MinLeaseDuration and MinRenewInterval (the
// latter for MinBackoff too). The error is a *ConfigError naming the
// field and the bound.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve returns c with defaults filled in, or the first bound it breaks.
func (c Config) resolve() (Config, error) {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"LeaseDuration", c.LeaseDuration},
		{"RenewInterval", c.RenewInterval},
		{"Margin", c.Margin},
		{"RetryJitter", c.RetryJitter},
		{"MinBackoff", c.MinBackoff},
	} {
		if f.d < 0 {
			return c, &ConfigError{Field: f.name, Reason: fmt.Sprintf("%v is negative", f.d)}
		}
	}
	if c.Drift != c.Drift || c.Drift < 0 || c.Drift >= 0.5 { // c.Drift != c.Drift: NaN
		return c, &ConfigError{Field: "Drift", Reason: fmt.Sprintf("%v must lie in [0, 0.5)", c.Drift)}
	}
	c = c.withDefaults()
	if c.LeaseDuration < MinLeaseDuration {
		return c, &ConfigError{Field: "LeaseDuration", Reason: fmt.Sprintf(
			"%v: must be at least %v", c.LeaseDuration, MinLeaseDuration)}
	}
	if c.RenewInterval < MinRenewInterval {
		return c, &ConfigError{Field: "RenewInterval", Reason: fmt.Sprintf(
			"%v: must be at least %v", c.RenewInterval, MinRenewInterval)}
	}
	if c.MinBackoff < MinRenewInterval {
		return c, &ConfigError{Field: "MinBackoff", Reason: fmt.Sprintf(
			"%v: must be at least %v", c.MinBackoff, MinRenewInterval)}
	}
	if c.RenewInterval*2 > c.LeaseDuration {
		return c, &ConfigError{Field: "RenewInterval", Reason: fmt.Sprintf(
			"%v: two keep-alives must fit in LeaseDuration %v", c.RenewInterval, c.LeaseDuration)}
	}
	if local := c.localValidity(c.LeaseDuration); local <= c.RenewInterval {
		return c, &ConfigError{Field: "LeaseDuration", Reason: fmt.Sprintf(
			"%v: LeaseDuration*(1-Drift)-Margin = %v must exceed RenewInterval %v", c.LeaseDuration, local, c.RenewInterval)}
	}
	return c, nil
}

// localValidity is how long a grant of remaining stays valid locally:
// remaining*(1-drift) - margin (R-DL-1).
func (c Config) localValidity(remaining time.Duration) time.Duration {
	// A grant beyond a century is a broken backend's: clamp it, so that no
	// conversion or addition overflows.
	remaining = min(max(remaining, 0), 100*365*24*time.Hour)
	return time.Duration(float64(remaining)*(1-c.Drift)) - c.Margin
}
