package simbamysql

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/simba-go/simba/core/backendtest"
)

// TestOpenRefusesHostileURLs: each URL or DSN Open cannot use is refused
// before any dial, by an error that names its problem and shows no
// password.
func TestOpenRefusesHostileURLs(t *testing.T) {
	open := func(ctx context.Context, url string) (io.Closer, error) { return Open(ctx, url, Options{}) }
	userinfo := "u:" + backendtest.Secret
	urls := backendtest.HostileURLs("mysql", "postgres", userinfo, "/db")
	urls = append(urls,
		backendtest.BadURL{URL: "mysql://" + userinfo + "@h:abc/db", Want: []string{"port"}},
		backendtest.BadURL{URL: "mysql://" + userinfo + "@/db", Want: []string{"no host"}},
		backendtest.BadURL{URL: "mysql://" + userinfo + "@h1:3306,h2:1:99/db", Want: []string{"host 2 of 2: the port"}},
		backendtest.BadURL{URL: userinfo + "@tcp(h:99999)/db", Want: []string{`port "99999"`, "65535"}},
		backendtest.BadURL{URL: userinfo + "@tcp(h:1:99)/db", Want: []string{`port "1:99"`}},
	)
	backendtest.URLsRefused(t, open, urls, backendtest.Secret)
}

// TestOpenWaitsForItsContext: a server that accepts connections and never
// answers makes Open fail when ctx ends, not at the driver's own timeouts
// (here 1s).
func TestOpenWaitsForItsContext(t *testing.T) {
	url := "mysql://u@" + backendtest.SilentListener(t) + "/db?timeout=1s&readTimeout=1s&writeTimeout=1s"
	backendtest.OpenWaitsForContext(t, 2500*time.Millisecond, func(ctx context.Context) (io.Closer, error) {
		return Open(ctx, url, Options{})
	})
}
