package simbaredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// serverURL returns the URL of the test server from SIMBA_TEST_REDIS_URL.
// Without it the test is skipped, unless CI is set: CI must never pass by
// skipping.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("SIMBA_TEST_REDIS_URL")
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SIMBA_TEST_REDIS_URL is not set and CI is: run tools/testenv/up redis")
		}
		t.Skip("SIMBA_TEST_REDIS_URL is not set (eval \"$(tools/testenv/up redis)\")")
	}
	return u
}

// testPrefix returns a key prefix no other test or run uses, with a hash
// tag so that the tests also cover the Cluster-ready layout.
func testPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "{simbatest-" + hex.EncodeToString(b[:]) + "}:"
}

// rawClient returns a plain client of url for inspecting and damaging
// keys; it is closed when the test ends.
func rawClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("ParseURL: %v", err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// openBackend opens a Backend on url with opts (a fresh test prefix when
// opts.KeyPrefix is empty). When the test ends it is closed and, for a test
// prefix, every key under the prefix deleted.
func openBackend(t testing.TB, url string, opts Options) *Backend {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = testPrefix()
	}
	b, err := Open(callCtx(t), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	raw := rawClient(t, url)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if strings.HasPrefix(opts.KeyPrefix, "{simbatest-") {
			deleteKeys(t, raw, opts.KeyPrefix)
		}
	})
	return b
}

// deleteKeys removes every key under prefix, which must be one testPrefix
// made: a shared server may hold other data under other prefixes.
func deleteKeys(t testing.TB, c *redis.Client, prefix string) {
	if !strings.HasPrefix(prefix, "{simbatest-") {
		t.Errorf("refusing to delete the keys under %q, not a test prefix", prefix)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleaning keys under %q: %v", prefix, err)
	}
}

// callCtx returns the context of one backend call in a test.
func callCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustWin acquires name for s and fails the test unless it was won.
func mustWin(t *testing.T, b *Backend, s simba.SessionID, name string) simba.AcquireResult {
	t.Helper()
	r, err := b.Acquire(callCtx(t), s, name)
	if err != nil || !r.Won {
		t.Fatalf("Acquire(%q) = %+v, %v; want won", name, r, err)
	}
	return r
}

// watchSubscribed returns a watch of name on b, which WatchRelease makes
// only once b's release subscription is live, so that it sees every later
// release. The watch ends with ctx.
func watchSubscribed(ctx context.Context, t *testing.T, b *Backend, name string) <-chan struct{} {
	t.Helper()
	ch, err := b.WatchRelease(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	b.notify.mu.Lock()
	live := b.notify.live
	b.notify.mu.Unlock()
	if !live {
		t.Fatal("WatchRelease returned before the subscription was live")
	}
	return ch
}

// quiet is a logger for tests that provoke warnings on purpose.
var quiet = slog.New(slog.DiscardHandler)
