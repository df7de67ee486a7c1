package fxsimba

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The environment variables ConfigFromEnv reads, the counterpart of the
// spec's simba.session.* properties. Durations are in Go syntax (15s,
// 500ms, 1m30s), the drift is a fraction (0.01). An unset or empty variable
// leaves its field at the default; "0" for the drift or the margin means
// exactly zero.
const (
	EnvLeaseDuration = "SIMBA_SESSION_LEASE_DURATION" // simba.Config.LeaseDuration
	EnvRenewInterval = "SIMBA_SESSION_RENEW_INTERVAL" // simba.Config.RenewInterval
	EnvDrift         = "SIMBA_SESSION_DRIFT"          // simba.Config.Drift
	EnvMargin        = "SIMBA_SESSION_MARGIN"         // simba.Config.Margin
	EnvRetryJitter   = "SIMBA_SESSION_RETRY_JITTER"   // simba.Config.RetryJitter
	EnvMinBackoff    = "SIMBA_SESSION_MIN_BACKOFF"    // simba.Config.MinBackoff
)

// envOf maps each simba.Config field to its variable.
var envOf = map[string]string{
	"LeaseDuration": EnvLeaseDuration,
	"RenewInterval": EnvRenewInterval,
	"Drift":         EnvDrift,
	"Margin":        EnvMargin,
	"RetryJitter":   EnvRetryJitter,
	"MinBackoff":    EnvMinBackoff,
}

// ConfigFromEnv reads the session timing from the SIMBA_SESSION_*
// environment variables and checks it with simba.Config.Validate. Provide
// it to the app, and Module uses what it returns:
//
//	fx.Provide(fxsimba.ConfigFromEnv)
//
// A value that does not parse is an error naming the variable and its
// value; a timing out of bounds (R-CFG-2..4) is an error naming the
// variable and the bound, wrapping the *simba.ConfigError, so the app fails
// at start.
func ConfigFromEnv() (simba.Config, error) { return ConfigFromLookup(os.LookupEnv) }

// ConfigFromLookup is ConfigFromEnv with the variables read through lookup
// instead of the environment: a map, flags, a secrets store. A nil lookup
// is an error wrapping simba.ErrInvalidArgument.
func ConfigFromLookup(lookup func(key string) (string, bool)) (simba.Config, error) {
	if lookup == nil {
		return simba.Config{}, fmt.Errorf("fxsimba: ConfigFromLookup: nil lookup function: %w", simba.ErrInvalidArgument)
	}
	var cfg simba.Config
	get := func(key string) string {
		v, _ := lookup(key)
		return strings.TrimSpace(v)
	}
	durations := []struct {
		key string
		to  *time.Duration
	}{
		{EnvLeaseDuration, &cfg.LeaseDuration},
		{EnvRenewInterval, &cfg.RenewInterval},
		{EnvMargin, &cfg.Margin},
		{EnvRetryJitter, &cfg.RetryJitter},
		{EnvMinBackoff, &cfg.MinBackoff},
	}
	for _, d := range durations {
		v := get(d.key)
		if v == "" {
			continue
		}
		parsed, err := time.ParseDuration(v)
		if err != nil {
			return simba.Config{}, fmt.Errorf("fxsimba: %s=%q: want a Go duration such as 15s or 500ms: %w", d.key, v, err)
		}
		*d.to = parsed
	}
	if v := get(EnvMargin); v != "" && cfg.Margin == 0 {
		cfg.NoMargin = true
	}
	if v := get(EnvDrift); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return simba.Config{}, fmt.Errorf("fxsimba: %s=%q: want a fraction such as 0.01: %w", EnvDrift, v, err)
		}
		cfg.Drift = f
		cfg.NoDrift = f == 0
	}
	if err := cfg.Validate(); err != nil {
		var ce *simba.ConfigError
		if errors.As(err, &ce) && envOf[ce.Field] != "" {
			key := envOf[ce.Field]
			if v := get(key); v != "" {
				return simba.Config{}, fmt.Errorf("fxsimba: %s=%s: %w", key, v, err)
			}
			return simba.Config{}, fmt.Errorf("fxsimba: %s (not set, so the default): %w", key, err)
		}
		return simba.Config{}, fmt.Errorf("fxsimba: session timing from SIMBA_SESSION_*: %w", err)
	}
	return cfg, nil
}
