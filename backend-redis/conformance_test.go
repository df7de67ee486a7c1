package simbaredis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
	"github.com/simba-go/simba/core/fencingtest"
)

// TestConformance runs the backend conformance suite on the real server;
// every simulated node is its own Backend and connection, all under one
// key prefix.
func TestConformance(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	raw := rawClient(t, url)
	t.Cleanup(func() { deleteKeys(t, raw, prefix) })
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	// Nodes of their own: openBackend's client for the cleanup would be
	// a goroutine the ClosedBackend check finds left after Close.
	h := harness(raw, prefix, func(t testing.TB) *Backend {
		b, err := Open(callCtx(t), url, Options{KeyPrefix: prefix})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
	h.Fences = []backendtest.Fence{{Name: "fence", New: func(t testing.TB) fencingtest.Resource {
		name := fenceName()
		t.Cleanup(func() { raw.Del(context.Background(), "{"+name+"}:token", "{"+name+"}:value") })
		r, err := openFenceResource(url, name)
		if err != nil {
			t.Fatalf("open fence: %v", err)
		}
		return r
	}}}
	h.Silent = func(ctx context.Context, t testing.TB) (simba.Backend, error) {
		return Open(ctx, "redis://"+backendtest.SilentListener(t)+"/0", Options{KeyPrefix: prefix, Logger: quiet})
	}
	h.Silenced = func(t testing.TB) (simba.Backend, func()) {
		p := backendtest.NewProxy(t, opts.Addr)
		return openBackend(t, "redis://"+p.Addr()+"/"+fmt.Sprint(opts.DB), Options{KeyPrefix: prefix}), p.Silence
	}
	h.Secrets = secretCases("redis", opts.Addr, nil)
	backendtest.Run(t, h)
}

// harness is the conformance harness of the server raw is a client of,
// with nodes from open under key prefix.
func harness(raw *redis.Client, prefix string, open func(t testing.TB) *Backend) backendtest.Harness {
	return backendtest.Harness{
		New:           func(t testing.TB) simba.Backend { return open(t) },
		Lease:         2 * time.Second,
		ListUnordered: true,
		ErrClosed:     ErrClosed,
		Expire: func(t testing.TB, id simba.SessionID) {
			if err := raw.Del(context.Background(), prefix+"session:"+string(id)).Err(); err != nil {
				t.Fatalf("delete the key of session %s: %v", id, err)
			}
		},
		Stored: func(t testing.TB, name string) bool {
			n, err := raw.Exists(context.Background(), prefix+"lease:"+name).Result()
			if err != nil {
				t.Fatalf("EXISTS the lease of %q: %v", name, err)
			}
			return n > 0
		},
	}
}

// secretCases are the cases of the conformance check SecretsInErrors on
// the server at host: a URL that cannot be used, a server that cannot be
// reached and a password the server refuses, with the password raw or
// percent-encoded in the URL, or in Options.Password.
func secretCases(scheme, host string, tlsConfig *tls.Config) func(testing.TB) []backendtest.SecretCase {
	paths := []struct {
		name, host, path string
		isErr            error // what the error must match when the URL was usable
		within           time.Duration
	}{
		{"invalid URL", host, "/0/extra", ErrInvalidOptions, time.Second},
		{"unreachable", "127.0.0.1:1", "/0", nil, 100 * time.Millisecond}, // go-redis dials until ctx ends
		{"wrong password", host, "/0", ErrAuth, 5 * time.Second},
	}
	forms := []struct {
		name    string
		url     func(pw, rest string) string
		options bool
	}{
		{"raw in URL", func(pw, rest string) string { return scheme + "://simba:" + pw + "@" + rest }, false},
		{"encoded in URL", func(pw, rest string) string {
			return scheme + "://" + url.UserPassword("simba", pw).String() + "@" + rest
		}, false},
		{"in Options", func(_, rest string) string { return scheme + "://simba@" + rest }, true},
	}
	return func(testing.TB) []backendtest.SecretCase {
		var cases []backendtest.SecretCase
		for _, p := range paths {
			for _, f := range forms {
				cases = append(cases, backendtest.SecretCase{
					Name: scheme + "/" + p.name + "/" + f.name,
					Open: func(ctx context.Context, pw string, log *slog.Logger) (io.Closer, error) {
						opts := Options{Logger: log, TLSConfig: tlsConfig}
						if f.options {
							opts.Password = pw
						}
						b, err := Open(ctx, f.url(pw, p.host+p.path+"?max_retries=-1"), opts)
						if err != nil {
							return nil, err
						}
						return b, nil
					},
					// A raw password in a URL is refused as a URL or, for
					// ':' and '@', read as the path's own error.
					Want: func(err error) bool {
						return f.name == "raw in URL" || p.isErr == nil || errors.Is(err, p.isErr)
					},
					Within: p.within,
				})
			}
		}
		return cases
	}
}
