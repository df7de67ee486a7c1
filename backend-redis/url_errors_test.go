package simbaredis

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestOpenRefusesHostileURLs: each URL Open cannot use is refused before
// any dial, by an error that names its problem (the empty URL, the port
// "1:99" rather than a host "h:1", the port out of range, the missing
// host) and shows no password, in every form of URL.
func TestOpenRefusesHostileURLs(t *testing.T) {
	open := func(ctx context.Context, url string) (io.Closer, error) { return Open(ctx, url, Options{}) }
	userinfo := "u:" + backendtest.Secret
	urls := backendtest.HostileURLs("redis", "postgres", userinfo, "/0")
	urls = append(urls,
		backendtest.BadURL{URL: "redis://" + userinfo + "@h:abc/0", Want: []string{"port"}},
		backendtest.BadURL{URL: "redis://" + userinfo + "@/0", Want: []string{"no host"}},
		backendtest.BadURL{URL: "redis:///0", Want: []string{"no host"}},
		backendtest.BadURL{URL: "rediss://" + userinfo + "@h:1:99/0", Want: []string{`port "1:99"`}},
		backendtest.BadURL{URL: "redis+sentinel://" + userinfo + "@h:1:99/mymaster", Want: []string{`port "1:99"`}},
		backendtest.BadURL{URL: "redis+cluster://" + userinfo + "@h:1,h:1:99", Want: []string{`port "1:99"`}},
		backendtest.BadURL{URL: "redis+cluster://" + userinfo + "@h:1,h:70000", Want: []string{`port "70000"`, "65535"}},
		backendtest.BadURL{URL: "redis+cluster://" + userinfo + "@h:1,:7000", Want: []string{"no host"}},
	)
	backendtest.URLsRefused(t, open, urls, backendtest.Secret)
}

// TestOpenWaitsForItsContext: a server that accepts connections and never
// answers makes Open fail when ctx ends, not at go-redis's read timeout,
// which is shorter (here 1s, 3s by default): the caller's deadline is the
// bound of the connect.
func TestOpenWaitsForItsContext(t *testing.T) {
	url := "redis://" + backendtest.SilentListener(t) + "/0?read_timeout=1s&dial_timeout=1s"
	backendtest.OpenWaitsForContext(t, 2500*time.Millisecond, func(ctx context.Context) (io.Closer, error) {
		return Open(ctx, url, Options{})
	})
}

// TestOpenRefusesUndecodableQuery: a query pair of a redis:// URL that
// cannot be decoded (a bad percent escape, pairs separated by ';') is
// refused like an unknown parameter, before any dial, as the Sentinel
// and Cluster forms refuse it; go-redis alone would skip it silently.
func TestOpenRefusesUndecodableQuery(t *testing.T) {
	for _, give := range []string{
		"redis://127.0.0.1:1/0?%zz=1",
		"redis://127.0.0.1:1/0?dial_timeout=1s&%zz=1",
		"redis://127.0.0.1:1/0?dial_timeout=1s;read_timeout=1s",
		"rediss://127.0.0.1:1/0?a%=1",
		"unix:///tmp/simba-none.sock?db=0;x=1",
	} {
		t.Run(give, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			b, err := Open(ctx, give, Options{})
			if err == nil {
				_ = b.Close()
			}
			if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, simba.ErrInvalidURL) || !strings.Contains(err.Error(), "query") {
				t.Fatalf("Open(%q) = %v, want an invalid URL error about its query", give, err)
			}
		})
	}
}
