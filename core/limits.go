package simba

import (
	"fmt"
)

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
