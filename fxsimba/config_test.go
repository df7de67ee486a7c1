package fxsimba_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/fxsimba"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestConfigFromLookup(t *testing.T) {
	tests := []struct {
		name string
		give map[string]string
		want simba.Config
	}{
		{name: "nothing set", give: nil, want: simba.Config{}},
		{name: "empty values are unset", give: map[string]string{fxsimba.EnvLeaseDuration: "", fxsimba.EnvDrift: " "}, want: simba.Config{}},
		{
			name: "every variable",
			give: map[string]string{
				fxsimba.EnvLeaseDuration: "9s",
				fxsimba.EnvRenewInterval: "3s",
				fxsimba.EnvDrift:         "0.02",
				fxsimba.EnvMargin:        "100ms",
				fxsimba.EnvRetryJitter:   "1s",
				fxsimba.EnvMinBackoff:    "200ms",
			},
			want: simba.Config{
				LeaseDuration: 9 * time.Second, RenewInterval: 3 * time.Second, Drift: 0.02,
				Margin: 100 * time.Millisecond, RetryJitter: time.Second, MinBackoff: 200 * time.Millisecond,
			},
		},
		{name: "zero drift and margin mean zero", give: map[string]string{fxsimba.EnvDrift: "0", fxsimba.EnvMargin: "0s"},
			want: simba.Config{NoDrift: true, NoMargin: true}},
		{name: "spaces around values", give: map[string]string{fxsimba.EnvLeaseDuration: " 1m "}, want: simba.Config{LeaseDuration: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fxsimba.ConfigFromLookup(lookupIn(tt.give))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestConfigFromLookupNil: a nil lookup is an error, not a panic.
func TestConfigFromLookupNil(t *testing.T) {
	cfg, err := fxsimba.ConfigFromLookup(nil)
	if !errors.Is(err, simba.ErrInvalidArgument) || !strings.Contains(err.Error(), "nil lookup") {
		t.Errorf("error %v, want one about the nil lookup that matches simba.ErrInvalidArgument", err)
	}
	if cfg != (simba.Config{}) {
		t.Errorf("config %+v with the error, want the zero Config", cfg)
	}
}

func TestConfigFromLookupErrors(t *testing.T) {
	tests := []struct {
		name       string
		give       map[string]string
		want       string
		wantConfig bool // the error wraps a *simba.ConfigError
	}{
		{name: "two keep-alives must fit (R-CFG-2)",
			give: map[string]string{fxsimba.EnvLeaseDuration: "10s", fxsimba.EnvRenewInterval: "5001ms"},
			want: "fxsimba: SIMBA_SESSION_RENEW_INTERVAL=5001ms: simba: config RenewInterval: 5.001s: two keep-alives must fit in LeaseDuration 10s", wantConfig: true},
		{name: "local validity must exceed the renew interval (R-CFG-3)",
			give: map[string]string{fxsimba.EnvLeaseDuration: "1s", fxsimba.EnvRenewInterval: "500ms", fxsimba.EnvDrift: "0.45"},
			want: "fxsimba: SIMBA_SESSION_LEASE_DURATION=1s: simba: config LeaseDuration:", wantConfig: true},
		{name: "drift out of range (R-CFG-4)", give: map[string]string{fxsimba.EnvDrift: "0.5"},
			want: "fxsimba: SIMBA_SESSION_DRIFT=0.5: simba: config Drift: 0.5 must lie in [0, 0.5)", wantConfig: true},
		{name: "negative duration (R-CFG-4)", give: map[string]string{fxsimba.EnvMargin: "-1ms"},
			want: "fxsimba: SIMBA_SESSION_MARGIN=-1ms: simba: config Margin: -1ms is negative", wantConfig: true},
		{name: "bound broken by a default",
			give: map[string]string{fxsimba.EnvRenewInterval: "10s"},
			want: "fxsimba: SIMBA_SESSION_RENEW_INTERVAL=10s: simba: config RenewInterval: 10s: two keep-alives must fit in LeaseDuration 15s", wantConfig: true},
		{name: "variable not set, default breaks the bound",
			give: map[string]string{fxsimba.EnvLeaseDuration: "100ms", fxsimba.EnvMargin: "70ms"},
			want: "fxsimba: SIMBA_SESSION_LEASE_DURATION=100ms", wantConfig: true},
		{name: "duration without a unit", give: map[string]string{fxsimba.EnvLeaseDuration: "15"},
			want: `fxsimba: SIMBA_SESSION_LEASE_DURATION="15": want a Go duration such as 15s or 500ms`},
		{name: "drift not a number", give: map[string]string{fxsimba.EnvDrift: "one percent"},
			want: `fxsimba: SIMBA_SESSION_DRIFT="one percent": want a fraction such as 0.01`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fxsimba.ConfigFromLookup(lookupIn(tt.give))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n  %q\ndoes not start with\n  %q", err, tt.want)
			}
			var ce *simba.ConfigError
			if got := errors.As(err, &ce); got != tt.wantConfig {
				t.Errorf("wraps a *simba.ConfigError: %v, want %v", got, tt.wantConfig)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(fxsimba.EnvLeaseDuration, "6s")
	t.Setenv(fxsimba.EnvRenewInterval, "")
	got, err := fxsimba.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if want := (simba.Config{LeaseDuration: 6 * time.Second}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
