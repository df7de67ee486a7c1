package backendtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/core/backendtest"
	"github.com/simba-go/simba/core/memory"
)

const secret = "Zq7SecretVw3Ky"

// recorder is a testing.TB that keeps the failures reported to it.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(r)
}

func (r *recorder) Fatal(args ...any) {
	r.Errorf("%s", fmt.Sprint(args...))
	panic(r)
}

// run calls check with a recorder and returns what it reported.
func run(t *testing.T, check func(testing.TB)) (failed []string) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	check(r)
	return nil
}

// hiddenError shows the secret only with %#v, as a driver's struct does.
type hiddenError struct{ Config string }

func (*hiddenError) Error() string { return "config refused" }

// loopError is its own cause.
type loopError struct{}

func (e *loopError) Error() string { return "again" }
func (e *loopError) Unwrap() error { return e }

func TestNoSecret(t *testing.T) {
	tests := []struct {
		name string
		give error
		want string // in the failure; "" for none
	}{
		{"nil", nil, ""},
		{"clean chain", fmt.Errorf("open: %w", errors.Join(context.Canceled, io.EOF)), ""},
		{"in Error", errors.New("near '" + secret + "'"), "shows the secret"},
		{"deep in a join", fmt.Errorf("a: %w", errors.Join(io.EOF, fmt.Errorf("b: %w", &hiddenError{Config: secret}))), "shows the secret"},
		{"only in %#v", &hiddenError{Config: "password=" + secret}, "shows the secret"},
		{"a chain without end", &loopError{}, "more than 100 errors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed := run(t, func(tb testing.TB) { backendtest.NoSecret(tb, "Open", tt.give, "", secret) })
			switch {
			case tt.want == "" && len(failed) > 0:
				t.Errorf("NoSecret failed: %q", failed)
			case tt.want != "" && (len(failed) == 0 || !strings.Contains(strings.Join(failed, "\n"), tt.want)):
				t.Errorf("NoSecret reported %q, want a failure saying %q", failed, tt.want)
			}
		})
	}
}

func TestNoSecretIn(t *testing.T) {
	if failed := run(t, func(tb testing.TB) { backendtest.NoSecretIn(tb, "the log", "level=INFO", secret) }); len(failed) > 0 {
		t.Errorf("a clean text failed: %q", failed)
	}
	if failed := run(t, func(tb testing.TB) { backendtest.NoSecretIn(tb, "the log", "pw="+secret, secret) }); len(failed) != 1 {
		t.Errorf("a text with the secret reported %q, want one failure", failed)
	}
}

func TestOpenFailsHiding(t *testing.T) {
	closed := false
	opens := func(context.Context) (io.Closer, error) {
		return closerFunc(func() error { closed = true; return nil }), nil
	}
	if failed := run(t, func(tb testing.TB) { backendtest.OpenFailsHiding(tb, "Open(x)", time.Second, opens, secret) }); len(failed) != 1 || !closed {
		t.Errorf("an open that succeeds reported %q, closed %v; want one failure and the backend closed", failed, closed)
	}
	leaks := func(context.Context) (io.Closer, error) { return nil, errors.New("bad " + secret) }
	if failed := run(t, func(tb testing.TB) { backendtest.OpenFailsHiding(tb, "Open(x)", time.Second, leaks, secret) }); len(failed) != 1 {
		t.Errorf("an error with the secret reported %q, want one failure", failed)
	}
	bounded := func(ctx context.Context) (io.Closer, error) { <-ctx.Done(); return nil, ctx.Err() }
	if failed := run(t, func(tb testing.TB) {
		backendtest.OpenFailsHiding(tb, "Open(x)", 10*time.Millisecond, bounded, secret)
	}); len(failed) != 0 {
		t.Errorf("an open ended by its bound reported %q", failed)
	}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

type plainOptions struct{ Prefix, Password string }

// maskedOptions prints and logs without its password.
type maskedOptions struct{ Prefix, Password string }

func (o maskedOptions) String() string   { return "{Prefix:" + o.Prefix + " Password:xxxxx}" }
func (o maskedOptions) GoString() string { return o.String() }
func (o maskedOptions) LogValue() slog.Value {
	return slog.GroupValue(slog.String("Prefix", o.Prefix), slog.String("Password", "xxxxx"))
}

func TestPrintsWithoutSecret(t *testing.T) {
	masked := maskedOptions{"app_", secret}
	if failed := run(t, func(tb testing.TB) { backendtest.PrintsWithoutSecret(tb, masked, &masked, secret, "app_") }); len(failed) > 0 {
		t.Errorf("masked options reported %q", failed)
	}
	// Each of the formatted and the logged texts is checked.
	plain := plainOptions{"app_", secret}
	if failed := run(t, func(tb testing.TB) { backendtest.PrintsWithoutSecret(tb, plain, &plain, secret, "app_") }); len(failed) != 2 {
		t.Errorf("plain options reported %q, want two failures", failed)
	}
	if failed := run(t, func(tb testing.TB) {
		backendtest.PrintsWithoutSecret(tb, masked, &masked, secret, "app_", "not-shown")
	}); len(failed) != 2 {
		t.Errorf("a hidden visible value reported %q, want two failures", failed)
	}
}

// TestLeaseAboveMaximumIsAConfigError: a backend that accepts a lease
// above the maximum it is said to grant fails the check.
func TestLeaseAboveMaximumIsAConfigError(t *testing.T) {
	b := memory.New().Connect()
	failed := run(t, func(tb testing.TB) { backendtest.LeaseAboveMaximumIsAConfigError(tb, b, 10*time.Second) })
	if len(failed) != 3 {
		t.Errorf("a backend without a limit reported %q, want one failure per lease above the maximum", failed)
	}
}
