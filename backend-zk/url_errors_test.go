package simbazk

import (
	"context"
	"io"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestOpenBackendRefusesHostileURLs: each zk:// URL simba.OpenBackend
// cannot use is refused before any dial, by an error that names its
// problem and shows no password.
func TestOpenBackendRefusesHostileURLs(t *testing.T) {
	open := func(ctx context.Context, url string) (io.Closer, error) {
		if url == "" || url[0] == ' ' || url[0] == 'n' || url[0] == 'r' {
			// Not zk://: what ParseURL says of it.
			_, _, err := ParseURL(url)
			if err == nil {
				t.Fatalf("ParseURL(%q) succeeded", url)
			}
			return nil, err
		}
		return simba.OpenBackend(ctx, url)
	}
	userinfo := "u:" + backendtest.Secret
	urls := backendtest.HostileURLs("zk", "redis", userinfo, "")
	urls = append(urls,
		backendtest.BadURL{URL: "zk://" + userinfo + "@h:abc", Want: []string{`port "abc"`}},
		backendtest.BadURL{URL: "zk://" + userinfo + "@h", Want: []string{"no port"}},
		backendtest.BadURL{URL: "zk://" + userinfo + "@", Want: []string{"no server"}},
		backendtest.BadURL{URL: "zk://" + userinfo + "@h1:2181,h2:1:99/app", Want: []string{`port "1:99"`}},
		backendtest.BadURL{URL: "zk://" + userinfo + "@h1:2181,h2:70000/app", Want: []string{`port "70000"`}},
	)
	backendtest.URLsRefused(t, open, urls, backendtest.Secret)
}

// TestOpenRefusesHostileConnectStrings: Open's connect string is checked
// as a URL's servers are; a URL given to Open is refused without quoting
// its user information.
func TestOpenRefusesHostileConnectStrings(t *testing.T) {
	open := func(ctx context.Context, connect string) (io.Closer, error) { return Open(ctx, connect, Options{}) }
	backendtest.URLsRefused(t, open, []backendtest.BadURL{
		{URL: "", Want: []string{"empty"}},
		{URL: "   ", Want: []string{"spaces"}},
		{URL: "h:1:99", Want: []string{`port "1:99"`}},
		{URL: "h:99999", Want: []string{`port "99999"`, "65535"}},
		{URL: "h1:2181,:2181", Want: []string{"no host"}},
		{URL: "h1:2181,h2", Want: []string{"no port"}},
		{URL: "zk://u:" + backendtest.Secret + "@h:2181", Want: []string{"a URL", "ParseURL"}},
		{URL: "redis://u:" + backendtest.Secret + "@h:2181", Want: []string{"a URL"}},
	}, backendtest.Secret)
}

// TestOpenWaitsForItsContext: a server that accepts connections and never
// answers makes Open fail when ctx ends, not after DialTimeout (1s by
// default), which bounds one attempt.
func TestOpenWaitsForItsContext(t *testing.T) {
	addr := backendtest.SilentListener(t)
	backendtest.OpenWaitsForContext(t, 2500*time.Millisecond, func(ctx context.Context) (io.Closer, error) {
		return Open(ctx, addr, Options{})
	})
}
