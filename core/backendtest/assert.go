package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// Secret is a credential for the tests of masking: letters and digits
// only, so that no form of a URL changes it, and long enough that no
// server's message holds it by chance.
const Secret = "Zq7SecretVw3Ky"

// maxChain bounds how many errors ErrorTexts walks, so that a chain that
// loops back on itself still ends.
const maxChain = 100

// ErrorTexts returns every text err shows: Error, %v, %+v and %#v of err
// and of each error its chain holds (Unwrap, single or multiple), one per
// line. A chain of more than 100 errors ends with a line that says so.
func ErrorTexts(err error) string {
	text, _ := errorTexts(err)
	return text
}

// errorTexts is ErrorTexts, and whether it walked the whole chain.
func errorTexts(err error) (text string, whole bool) {
	var b strings.Builder
	seen := 0
	whole = true
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if seen == maxChain {
			if whole {
				fmt.Fprintf(&b, "(the chain goes on past %d errors)\n", maxChain)
			}
			whole = false
			return
		}
		seen++
		fmt.Fprintf(&b, "%s\n%v\n%+v\n%#v\n", e.Error(), e, e, e)
		switch u := e.(type) { //nolint:errorlint // every level of the chain, one at a time
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return b.String(), whole
}

// NoSecret fails t if a text of err or of an error of its chain, in any
// fmt verb (see [ErrorTexts]), holds one of secrets, or if the chain is
// too long to be read whole. what names the call that returned err. A nil
// err shows nothing and passes.
func NoSecret(t testing.TB, what string, err error, secrets ...string) {
	t.Helper()
	text, whole := errorTexts(err)
	if !whole {
		t.Errorf("%s: the error chain holds more than %d errors, not all of them checked:\n%s", what, maxChain, text)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s: the error chain shows the secret:\n%s", what, text)
			return
		}
	}
}

// NoSecretIn fails t if text, which what names (a log, a printed value),
// holds one of secrets.
func NoSecretIn(t testing.TB, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s shows the secret:\n%s", what, text)
			return
		}
	}
}

// LogBuffer is a log destination safe for concurrent writes: the
// backend's goroutines may log into it while the test reads it. Its zero
// value is empty and ready.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger returns a logger that writes every record, debug included, as
// text into l.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// OpenFailsHiding calls open with a context that ends after within, and
// expects an error: if open opens, what it opened is closed and t fails at
// once. The error must show none of secrets (see [NoSecret]). what names
// the call, as in "Open(url)".
func OpenFailsHiding(t testing.TB, what string, within time.Duration, open func(context.Context) (io.Closer, error), secrets ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	c, err := open(ctx)
	cancel()
	if err == nil {
		_ = c.Close()
		t.Fatalf("%s succeeded", what)
	}
	NoSecret(t, what, err, secrets...)
}

// PrintsWithoutSecret fails t if v or ptr (a pointer to v) printed shows
// secret, or if a text of them misses one of visible, what is no secret
// and must still show. The texts are v and ptr in each of the fmt verbs
// %v, %+v, %#v, %s and %q, and the log of both through slog's text
// handler and of v through its JSON handler.
func PrintsWithoutSecret(t testing.TB, v, ptr any, secret string, visible ...string) {
	t.Helper()
	var b strings.Builder
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		fmt.Fprintf(&b, verb+"\n"+verb+"\n", v, ptr)
	}
	var logs LogBuffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("options", "opts", v, "ptr", ptr)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("options", "opts", v)
	for _, text := range []string{b.String(), logs.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("%T printed shows the secret:\n%s", v, text)
		}
		for _, want := range visible {
			if !strings.Contains(text, want) {
				t.Errorf("%T printed hides %q, which is no secret:\n%s", v, want, text)
			}
		}
	}
}

// LeaseAboveMaximumIsAConfigError checks that a client whose lease b
// would refuse at every OpenSession (above maxLease, the longest lease b
// grants) is refused by simba.New with a *simba.ConfigError about
// LeaseDuration, rather than created with no session ever open, and that a
// client asking for maxLease itself is created and closes cleanly.
func LeaseAboveMaximumIsAConfigError(t testing.TB, b simba.Backend, maxLease time.Duration) {
	t.Helper()
	for _, lease := range []time.Duration{maxLease + time.Millisecond, 25 * time.Hour, 1000 * time.Hour} {
		c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: lease}))
		var ce *simba.ConfigError
		if !errors.As(err, &ce) || ce.Field != "LeaseDuration" {
			if c != nil {
				_ = c.Close(context.Background())
			}
			t.Errorf("lease %v: simba.New = %v, want a *simba.ConfigError about LeaseDuration", lease, err)
		}
	}
	c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: maxLease}))
	if err != nil {
		t.Fatalf("lease %v: %v", maxLease, err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
