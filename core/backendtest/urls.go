package backendtest

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// BadURL is a URL an opener must refuse before it dials, and the words its
// error must hold to name the problem.
type BadURL struct {
	URL  string
	Want []string // each must be in the error's message, in any case
}

// HostileURLs returns the URLs that every backend must refuse by their
// problem, for a backend whose URLs are scheme://USERINFO@HOST:PORT/PATH:
// an empty URL, one of spaces only, a port that is not a number ("1:99"
// after the host), a port out of range, a missing host, an unknown scheme
// and otherScheme, the scheme of another backend. userinfo holds
// [Secret] and is put in each URL that has user information; path (with
// its leading '/', or "") follows the address.
func HostileURLs(scheme, otherScheme, userinfo, path string) []BadURL {
	base := scheme + "://" + userinfo + "@"
	return []BadURL{
		{"", []string{"empty"}},
		{"   ", []string{"spaces"}},
		{" " + base + "h:1" + path, []string{"space"}},
		{base + "h:1:99" + path, []string{`port "1:99"`}},
		{base + "h:99999" + path, []string{`port "99999"`, "65535"}},
		{base + "h:0" + path, []string{`port "0"`, "65535"}},
		{base + ":2000" + path, []string{"no host"}},
		{"nosuch://" + userinfo + "@h:1" + path, []string{"nosuch"}},
		{otherScheme + "://" + userinfo + "@h:1" + path, []string{otherScheme}},
	}
}

// URLsRefused calls open with each of urls and checks that it fails at
// once with an error that matches simba.ErrInvalidURL, holds each of the
// case's Want, and shows none of secrets (see [NoSecret]). open gets a
// context of 10 s: an error after more than 2 s, or one that does not
// match simba.ErrInvalidURL, came from a dial, not from the URL's check.
func URLsRefused(t *testing.T, open func(ctx context.Context, url string) (io.Closer, error), urls []BadURL, secrets ...string) {
	t.Helper()
	for _, c := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		b, err := open(ctx, c.URL)
		took := time.Since(start)
		cancel()
		if err == nil {
			_ = b.Close()
			t.Errorf("open(%q) succeeded", c.URL)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, simba.ErrInvalidURL) {
			t.Errorf("open(%q) = %v: does not match simba.ErrInvalidURL", c.URL, msg)
		}
		if took > 2*time.Second {
			t.Errorf("open(%q) took %v: a URL's check dials nothing", c.URL, took.Round(time.Millisecond))
		}
		for _, w := range c.Want {
			if !strings.Contains(strings.ToLower(msg), strings.ToLower(w)) {
				t.Errorf("open(%q) = %v: want the message to name %s", c.URL, msg, w)
			}
		}
		NoSecret(t, "open("+c.URL+")", err, secrets...)
	}
}

// SilentListener listens on a free port of 127.0.0.1, accepts every
// connection and holds it open without a byte of answer, as a hung server
// or a black-holing proxy does, until the test ends. It returns the
// listener's HOST:PORT.
func SilentListener(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// OpenWaitsForContext calls open with a context of d against a server
// that never answers, and checks that open fails once the context ends:
// not before 90% of d (a driver's own, shorter timeout cut it), and not
// much after it (within d plus 3 s, loose for a loaded machine).
func OpenWaitsForContext(t testing.TB, d time.Duration, open func(ctx context.Context) (io.Closer, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	b, err := open(ctx)
	took := time.Since(start)
	if err == nil {
		_ = b.Close()
		t.Fatalf("open of a silent server succeeded")
	}
	if took < d*9/10 || took > d+3*time.Second {
		t.Errorf("open of a silent server with a context of %v failed after %v, want about %v: %v",
			d, took.Round(time.Millisecond), d, err)
	}
}
