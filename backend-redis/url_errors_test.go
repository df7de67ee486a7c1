package simbaredis

import (
	"context"
	"io"
	"testing"
	"time"

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
