package simbazk

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestConformance runs the backend conformance suite on the real server:
// every node is a Backend of its own, all under one root.
func TestConformance(t *testing.T) {
	servers := testServers(t, "SIMBA_TEST_ZK_SERVERS")
	root := testRoot(t, servers)
	node := func(t testing.TB, servers []string) *Backend {
		b, err := New(servers, Options{Root: root, Logger: quiet()})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	backendtest.Run(t, backendtest.Harness{
		New:       func(t testing.TB) simba.Backend { return node(t, servers) },
		Lease:     2 * time.Second,
		ErrClosed: ErrClosed,
		Silent: func(ctx context.Context, t testing.TB) (simba.Backend, error) {
			b, err := Open(ctx, backendtest.SilentListener(t), Options{Root: root, DialTimeout: 5 * time.Second, Logger: quiet()})
			if err != nil {
				return nil, err
			}
			return b, nil
		},
		Silenced: func(t testing.TB) (simba.Backend, func()) {
			p := backendtest.NewProxy(t, servers[0])
			return node(t, []string{p.Addr()}), p.Silence
		},
		Secrets: func(testing.TB) []backendtest.SecretCase { return secretCases(servers[0]) },
	})
}

// secretCases are the cases of the conformance check SecretsInErrors: a
// digest password in a zk:// URL (read by ParseURL) that cannot be used or
// names a server that cannot be reached, or in Options.Auth for such a
// server.
func secretCases(server string) []backendtest.SecretCase {
	var cases []backendtest.SecretCase
	for _, c := range unusableURLs(server) {
		open := func(ctx context.Context, connect, auth string, log *slog.Logger) (io.Closer, error) {
			b, err := Open(ctx, connect, Options{Auth: auth, DialTimeout: 200 * time.Millisecond, Logger: log})
			if err != nil {
				return nil, err
			}
			return b, nil
		}
		cases = append(cases, backendtest.SecretCase{
			Name: "URL/" + c.name, Within: 500 * time.Millisecond,
			Open: func(ctx context.Context, pw string, log *slog.Logger) (io.Closer, error) {
				connect, auth, err := ParseURL("zk://simba:" + pw + "@" + c.rest)
				if err != nil {
					return nil, err
				}
				return open(ctx, connect, auth, log)
			},
		})
	}
	return append(cases, backendtest.SecretCase{
		Name: "Options/unreachable", Within: 500 * time.Millisecond,
		Open: func(ctx context.Context, pw string, log *slog.Logger) (io.Closer, error) {
			b, err := Open(ctx, "127.0.0.1:1", Options{Auth: "simba:" + pw, DialTimeout: 200 * time.Millisecond, Logger: log})
			if err != nil {
				return nil, err
			}
			return b, nil
		},
	})
}

// unusableURLs are what follows the user information of zk:// URLs that
// fail: unusable, or naming a server that cannot be reached.
func unusableURLs(server string) []struct{ name, rest string } {
	return []struct{ name, rest string }{
		{"query", server + "/x?auth=1"},
		{"fragment", server + "#x"},
		{"no port", "127.0.0.1"},
		{"no server", "/x"},
		{"bad chroot", server + "/zookeeper/x"},
		{"bad chroot component", server + "/a/../b"},
		{"unreachable", "127.0.0.1:1"},
	}
}
