package simbazk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// formSecret is the digest password of the tests of this file.
const formSecret = "Zq7SecretVw3Ky"

// errorTexts returns every text err shows: Error, %v, %+v and %#v of err
// and of each error its chain holds.
func errorTexts(err error) string {
	var b strings.Builder
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
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
	return b.String()
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCredentialsShowNowhere: a digest password, in a zk:// URL (with the
// characters that end other parts of a URL) or in Options.Auth, shows in no
// error of ParseURL, Open, New or simba.OpenBackend, in any error of their
// chain, in any fmt verb, in the backend's log, or in Options printed or
// logged; for URLs that cannot be used, servers that cannot be reached and
// a backend that opens and closes.
func TestCredentialsShowNowhere(t *testing.T) {
	server := testServers(t, "SIMBA_TEST_ZK_SERVERS")[0]
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	chroot := "/simba-secrets-" + hex.EncodeToString(nonce[:])
	passwords := []string{formSecret, formSecret + "@:/?#%", "a:" + formSecret}
	cases := []struct {
		name, rest string // after the user information
		ok         bool   // Open succeeds
	}{
		{"query", server + "/x?auth=1", false},
		{"fragment", server + "#x", false},
		{"no port", "127.0.0.1", false},
		{"no server", "/x", false},
		{"bad chroot", server + "/zookeeper/x", false},
		{"bad chroot component", server + "/a/../b", false},
		{"unreachable", "127.0.0.1:1", false},
		{"reachable", server + chroot, true},
	}
	for _, c := range cases {
		for _, pw := range passwords {
			t.Run(c.name+"/"+pw, func(t *testing.T) {
				check := func(what, text string) {
					t.Helper()
					if strings.Contains(text, formSecret) {
						t.Errorf("%s shows the password:\n%s", what, text)
					}
				}
				raw := "zk://simba:" + pw + "@" + c.rest
				connect, auth, err := ParseURL(raw)
				if err != nil {
					check("ParseURL's error", errorTexts(err))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				defer cancel()
				ob, err := simba.OpenBackend(ctx, raw)
				switch {
				case err != nil && c.ok:
					t.Fatalf("simba.OpenBackend(%q): %v", raw, err)
				case err != nil:
					check("simba.OpenBackend's error", errorTexts(err))
				default:
					_ = ob.Close()
				}
				if connect == "" {
					connect = c.rest
				}
				if auth == "" {
					auth = "simba:" + pw
				}
				var logs syncBuffer
				opts := Options{Auth: auth, DialTimeout: 200 * time.Millisecond,
					Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
				b, err := Open(ctx, connect, opts)
				switch {
				case err != nil && c.ok:
					t.Fatalf("Open(%q): %v", connect, err)
				case err != nil:
					check("Open's error", errorTexts(err))
				default:
					if _, err := b.OpenSession(ctx, 2*time.Second); err != nil {
						t.Errorf("OpenSession: %v", err)
					}
					_ = b.Close()
				}
				check("the log", logs.String())
				var p strings.Builder
				for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
					fmt.Fprintf(&p, verb+"\n"+verb+"\n", opts, &opts)
				}
				slog.New(slog.NewTextHandler(&p, nil)).Info("options", "opts", opts, "ptr", &opts)
				check("Options printed", p.String())
			})
		}
	}
}
