package features

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"
	simba "github.com/simba-go/simba/core"
)

func (w *world) defaultsFilled(name string) error {
	w.configs[name] = simba.DefaultConfig()
	return nil
}

// config returns the config the scenario calls name.
func (w *world) config(name string) (simba.Config, error) {
	cfg, ok := w.configs[name]
	if !ok {
		return simba.Config{}, fmt.Errorf("features: no config %q in this scenario", name)
	}
	return cfg, nil
}

// applyConfig sets the fields a two-column table names. "none" sets an
// exact zero Drift or Margin; "default" leaves a field at zero.
func applyConfig(cfg *simba.Config, t *godog.Table) error {
	for _, row := range t.Rows {
		if len(row.Cells) != 2 {
			return fmt.Errorf("features: a config table has two columns: field and value")
		}
		field, value := row.Cells[0].Value, strings.TrimSpace(row.Cells[1].Value)
		if err := setField(cfg, field, value); err != nil {
			return err
		}
	}
	return nil
}

func setField(cfg *simba.Config, field, value string) error {
	if field == "Drift" {
		switch value {
		case "none":
			cfg.Drift, cfg.NoDrift = 0, true
			return nil
		case "default":
			cfg.Drift, cfg.NoDrift = 0, false
			return nil
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("features: Drift %q: %w", value, err)
		}
		cfg.Drift = f
		return nil
	}
	var d time.Duration
	switch value {
	case "default":
	case "none":
		if field != "Margin" {
			return fmt.Errorf("features: only Drift and Margin can be none")
		}
		cfg.NoMargin = true
	default:
		var err error
		if d, err = time.ParseDuration(value); err != nil {
			return fmt.Errorf("features: %s %q: %w", field, value, err)
		}
	}
	p, err := durationField(cfg, field)
	if err != nil {
		return err
	}
	*p = d
	return nil
}

func durationField(cfg *simba.Config, field string) (*time.Duration, error) {
	switch field {
	case "LeaseDuration":
		return &cfg.LeaseDuration, nil
	case "RenewInterval":
		return &cfg.RenewInterval, nil
	case "Margin":
		return &cfg.Margin, nil
	case "RetryJitter":
		return &cfg.RetryJitter, nil
	case "MinBackoff":
		return &cfg.MinBackoff, nil
	}
	return nil, fmt.Errorf("features: Config has no field %q", field)
}

// checkConfig compares cfg with the fields a table names. "default" means
// the field is zero (left to its default).
func checkConfig(what string, cfg simba.Config, t *godog.Table) error {
	var errs []error
	for _, row := range t.Rows {
		field, want := row.Cells[0].Value, strings.TrimSpace(row.Cells[1].Value)
		var got string
		if field == "Drift" {
			got = strconv.FormatFloat(cfg.Drift, 'g', -1, 64)
			if want == "default" {
				want = "0"
			}
		} else {
			p, err := durationField(&cfg, field)
			if err != nil {
				return err
			}
			got = p.String()
			if want == "default" {
				want = "0s"
			} else if d, err := time.ParseDuration(want); err == nil {
				want = d.String()
			}
		}
		if got != want {
			errs = append(errs, fmt.Errorf("%s: %s is %s, want %s", what, field, got, want))
		}
	}
	return errors.Join(errs...)
}

func (w *world) configWith(name string, t *godog.Table) error {
	var cfg simba.Config
	if err := applyConfig(&cfg, t); err != nil {
		return err
	}
	w.configs[name] = cfg
	return nil
}

func (w *world) setTiming(t *godog.Table) error {
	w.timing = simba.Config{}
	return applyConfig(&w.timing, t)
}

// buildErrors validates cfg and builds a client with it, and returns both
// outcomes, and how many backend calls the client made before it was
// closed; a client built is closed at once.
func buildErrors(cfg simba.Config) (calls int, validate, build error) {
	validate = cfg.Validate()
	rec, b := newRecorder(nopBackend{})
	c, err := simba.New(b, simba.WithConfig(cfg), simba.WithLogger(quiet))
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = c.Close(ctx)
		if err != nil {
			err = fmt.Errorf("features: closing a client built with an accepted config: %w", err)
		}
	}
	rec.end()
	return len(rec.snapshot()), validate, err
}

func (w *world) configAccepted(name string) error {
	cfg, err := w.config(name)
	if err != nil {
		return err
	}
	_, v, b := buildErrors(cfg)
	if v != nil || b != nil {
		return fmt.Errorf("config %+v: Validate: %w; New: %w", cfg, v, b)
	}
	return nil
}

func (w *world) configRefused(name, field string) error {
	cfg, err := w.config(name)
	if err != nil {
		return err
	}
	calls, v, b := buildErrors(cfg)
	if calls != 0 {
		return fmt.Errorf("a client with a refused config made %d backend calls", calls)
	}
	for _, e := range []struct {
		how string
		err error
	}{{"Validate", v}, {"New", b}} {
		var ce *simba.ConfigError
		switch {
		case e.err == nil:
			return fmt.Errorf("%s accepted config %+v", e.how, cfg)
		case !errors.Is(e.err, simba.ErrInvalidConfig) || !errors.As(e.err, &ce):
			return fmt.Errorf("%s: %w is not a *simba.ConfigError", e.how, e.err)
		case ce.Field != field:
			return fmt.Errorf("%s refused the config because of %s (%w), want %s", e.how, ce.Field, e.err, field)
		}
	}
	return nil
}

// configRefusedNaming checks that config name is refused because of
// field, and that the error names the field and its value.
func (w *world) configRefusedNaming(name, field, value string) error {
	if err := w.configRefused(name, field); err != nil {
		return err
	}
	cfg, err := w.config(name)
	if err != nil {
		return err
	}
	if err = cfg.Validate(); err == nil {
		return fmt.Errorf("config %+v was accepted", cfg)
	}
	msg := err.Error()
	if !strings.Contains(msg, field) || !strings.Contains(msg, value) {
		return fmt.Errorf("the error %q does not name both %s and %s", msg, field, value)
	}
	return nil
}

// deriveVariant makes config name a copy of config from, changed as the
// table says.
func (w *world) deriveVariant(name, from string, t *godog.Table) error {
	cfg, err := w.config(from)
	if err != nil {
		return err
	}
	if err := applyConfig(&cfg, t); err != nil {
		return err
	}
	w.configs[name] = cfg
	return nil
}

func (w *world) configHas(name string, t *godog.Table) error {
	cfg, err := w.config(name)
	if err != nil {
		return err
	}
	return checkConfig("config "+strconv.Quote(name), cfg, t)
}

func (w *world) clientUses(name string, t *godog.Table) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	return checkConfig("node "+name+"'s client", n.cfg(), t)
}

// nopBackend answers nothing: the config scenarios only need a client to be
// built or refused, and count the calls it makes.
type nopBackend struct{}

var errNop = errors.New("features: this backend is never used")

func (nopBackend) OpenSession(ctx context.Context, _ time.Duration) (simba.SessionGrant, error) {
	<-ctx.Done()
	return simba.SessionGrant{}, errNop
}

func (nopBackend) KeepAlive(context.Context, simba.SessionID, simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	return simba.KeepAliveReply{}, errNop
}

func (nopBackend) Acquire(context.Context, simba.SessionID, string) (simba.AcquireResult, error) {
	return simba.AcquireResult{}, errNop
}

func (nopBackend) Release(context.Context, simba.SessionID, string, uint64) error { return errNop }

func (nopBackend) JoinGroup(context.Context, simba.SessionID, string) (int, error) { return 0, errNop }

func (nopBackend) LeaveGroup(context.Context, simba.SessionID, string) error { return errNop }

func (nopBackend) CloseSession(context.Context, simba.SessionID) error { return errNop }
