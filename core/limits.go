package simba

import (
	"fmt"
	"time"
)

// LeaseLimiter is implemented by a backend that refuses session leases
// above a bound: every OpenSession and KeepAlive of a longer lease fails,
// so a client configured with one would never open a session. New checks
// the Config's LeaseDuration against it and fails with a *ConfigError.
//
// A backend whose store shortens a lease it finds too long (a Zookeeper
// server's maxSessionTimeout) does not implement it: the engine follows the
// shorter grant (R-DL-5).
type LeaseLimiter interface {
	// MaxLeaseDuration returns the longest lease the backend accepts; zero
	// or less means no bound.
	MaxLeaseDuration() time.Duration
}

// checkLeaseLimit returns a *ConfigError when b implements LeaseLimiter and
// cfg's lease exceeds its bound.
func checkLeaseLimit(b Backend, cfg Config) error {
	l, ok := b.(LeaseLimiter)
	if !ok {
		return nil
	}
	if most := l.MaxLeaseDuration(); most > 0 && cfg.LeaseDuration > most {
		return &ConfigError{Field: "LeaseDuration", Reason: fmt.Sprintf(
			"%v: the backend accepts leases of at most %v", cfg.LeaseDuration, most)}
	}
	return nil
}
