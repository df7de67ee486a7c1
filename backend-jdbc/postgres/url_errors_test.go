package simbapg

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/core/backendtest"
)

// TestOpenRefusesHostileURLs: each URL Open cannot use is refused before
// any dial, by an error that names its problem and shows no password. An
// empty host before a port is kept out of the table: libpq reads it as the
// local socket of that port, and so does pgx.
func TestOpenRefusesHostileURLs(t *testing.T) {
	open := func(ctx context.Context, url string) (io.Closer, error) { return Open(ctx, url, Options{}) }
	userinfo := "u:" + backendtest.Secret
	urls := slices.DeleteFunc(backendtest.HostileURLs("postgres", "mysql", userinfo, "/db"), func(c backendtest.BadURL) bool {
		return strings.Contains(c.URL, "@:")
	})
	urls = append(urls,
		backendtest.BadURL{URL: "postgres://" + userinfo + "@h:abc/db", Want: []string{"port"}},
		backendtest.BadURL{URL: "postgresql://" + userinfo + "@h1:5432,h2:1:99/db", Want: []string{`port "1:99"`}},
		backendtest.BadURL{URL: "postgres://" + userinfo + "@h1:5432,h2:70000/db", Want: []string{`port "70000"`, "65535"}},
		backendtest.BadURL{URL: "postgres://" + userinfo + "@h1:5432,,h2:5432/db", Want: []string{"no host"}},
	)
	backendtest.URLsRefused(t, open, urls, backendtest.Secret)
}

// TestOpenWaitsForItsContext: a server that accepts connections and never
// answers makes Open fail when ctx ends, not when the pool's connect
// timeout of one host (here connect_timeout=1, DefaultConnectTimeout
// otherwise) ends first.
func TestOpenWaitsForItsContext(t *testing.T) {
	url := "postgres://u@" + backendtest.SilentListener(t) + "/db?sslmode=disable&connect_timeout=1"
	backendtest.OpenWaitsForContext(t, 2500*time.Millisecond, func(ctx context.Context) (io.Closer, error) {
		return Open(ctx, url, Options{})
	})
}
