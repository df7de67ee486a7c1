package simbapg

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
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

// TestOpenTakesAHostListEndingWithoutPort: postgres://u@h1:5432,h2/db, a
// host list whose last host takes the default port, is a URL pgx opens;
// Open refused it as "not a valid URL", url.Parse seeing the port
// "5432,h2".
func TestOpenTakesAHostListEndingWithoutPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Open(ctx, "postgres://u:"+backendtest.Secret+"@127.0.0.1:1,127.0.0.2/db?sslmode=disable&connect_timeout=2", Options{})
	if err == nil {
		_ = b.Close()
		t.Fatal("Open of two hosts that refuse succeeded")
	}
	if errors.Is(err, simba.ErrInvalidURL) || !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(err.Error(), "127.0.0.2") {
		t.Errorf("Open: %v, want a connect error naming both hosts", err)
	}
	backendtest.NoSecret(t, "Open", err, backendtest.Secret)
}
