package simbazk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

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
	passwords := []string{backendtest.Secret, backendtest.Secret + "@:/?#%", "a:" + backendtest.Secret}
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
				raw := "zk://simba:" + pw + "@" + c.rest
				connect, auth, err := ParseURL(raw)
				if err != nil {
					backendtest.NoSecret(t, "ParseURL", err, backendtest.Secret)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				defer cancel()
				ob, err := simba.OpenBackend(ctx, raw)
				switch {
				case err != nil && c.ok:
					t.Fatalf("simba.OpenBackend(%q): %v", raw, err)
				case err != nil:
					backendtest.NoSecret(t, "simba.OpenBackend", err, backendtest.Secret)
				default:
					_ = ob.Close()
				}
				if connect == "" {
					connect = c.rest
				}
				if auth == "" {
					auth = "simba:" + pw
				}
				var logs backendtest.LogBuffer
				opts := Options{Auth: auth, DialTimeout: 200 * time.Millisecond, Logger: logs.Logger()}
				b, err := Open(ctx, connect, opts)
				switch {
				case err != nil && c.ok:
					t.Fatalf("Open(%q): %v", connect, err)
				case err != nil:
					backendtest.NoSecret(t, "Open", err, backendtest.Secret)
				default:
					if _, err := b.OpenSession(ctx, 2*time.Second); err != nil {
						t.Errorf("OpenSession: %v", err)
					}
					_ = b.Close()
				}
				backendtest.NoSecretIn(t, "the log", logs.String(), backendtest.Secret)
				backendtest.PrintsWithoutSecret(t, opts, &opts, backendtest.Secret)
			})
		}
	}
}
