package main

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/core/backendtest"
)

// TestBackendURLsNameTheProblem: every URL simba cannot use, on every
// backend, is bad usage told in one line that names what is wrong (the
// empty URL, the port rather than the host, the missing host) and shows
// no password.
func TestBackendURLsNameTheProblem(t *testing.T) {
	userinfo := "u:" + backendtest.Secret
	var urls []backendtest.BadURL
	for _, s := range []struct{ scheme, other, path string }{
		{"redis", "postgres", "/0"},
		{"rediss", "mysql", "/0"},
		{"postgres", "mysql", "/db"},
		{"mysql", "redis", "/db"},
		{"zk", "redis", ""},
	} {
		for _, c := range backendtest.HostileURLs(s.scheme, s.other, userinfo, s.path) {
			if s.scheme == "postgres" && strings.Contains(c.URL, "@:") {
				continue // the local socket of that port, as libpq reads it
			}
			if strings.HasPrefix(c.URL, s.other+"://") {
				continue // a URL simba opens too
			}
			urls = append(urls, c)
		}
	}
	urls = append(urls,
		backendtest.BadURL{URL: "redis://h:1:99", Want: []string{`port "1:99"`}},
		backendtest.BadURL{URL: "redis://" + userinfo + "@/0", Want: []string{"no host"}},
		backendtest.BadURL{URL: "redis+cluster://" + userinfo + "@h:1,h:1:99", Want: []string{`port "1:99"`}},
		backendtest.BadURL{URL: "mysql://" + userinfo + "@/db", Want: []string{"no host"}},
		backendtest.BadURL{URL: "zk://" + userinfo + "@h1:2181,h2:1:99", Want: []string{`port "1:99"`}},
		backendtest.BadURL{URL: "zk://" + userinfo + "@h1:2181,:2181", Want: []string{"no host"}},
	)
	for _, c := range urls {
		t.Run(url.PathEscape(c.URL), func(t *testing.T) {
			r := runSimba(t, "status", "--backend", c.URL, "--connect-timeout", "5s", "--timeout", "1s")
			if r.code != exitUsage || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit code %d, stderr %q; want %d and one line", r.code, r.stderr, exitUsage)
			}
			for _, w := range c.Want {
				if !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(w)) {
					t.Errorf("stderr %q does not name %s", r.stderr, w)
				}
			}
			if strings.Contains(r.stderr, backendtest.Secret) {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
		})
	}
}

// TestConnectTimeoutBoundsEveryBackend: on a server that accepts
// connections and never answers, simba gives up when --connect-timeout
// ends, on every backend: not at a driver's own, shorter timeout (1s per
// Zookeeper server, 5s for pgx's connect and for go-redis), nor much
// later.
func TestConnectTimeoutBoundsEveryBackend(t *testing.T) {
	for _, c := range []struct {
		scheme, path string
		timeout      time.Duration
	}{
		{"redis", "/0", 2 * time.Second},
		{"postgres", "/db?sslmode=disable", 2 * time.Second},
		{"mysql", "/db", 2 * time.Second},
		{"zk", "", 2 * time.Second},
		// Beyond the 5s of the drivers' defaults.
		{"redis", "/0", 6 * time.Second},
		{"postgres", "/db?sslmode=disable", 6 * time.Second},
	} {
		t.Run(c.scheme+"-"+c.timeout.String(), func(t *testing.T) {
			t.Parallel()
			u := c.scheme + "://u@" + backendtest.SilentListener(t) + c.path
			if c.scheme == "zk" {
				u = "zk://" + strings.TrimPrefix(u, "zk://u@")
			}
			start := time.Now()
			r := runSimba(t, "status", "--backend", u, "--connect-timeout", c.timeout.String(), "--timeout", "1s")
			took := time.Since(start)
			if r.code != exitUnavailable {
				t.Errorf("exit code %d, stderr %q; want %d", r.code, r.stderr, exitUnavailable)
			}
			if took < c.timeout*9/10 || took > c.timeout+3*time.Second {
				t.Errorf("gave up after %v with --connect-timeout %v; stderr %q", took.Round(time.Millisecond), c.timeout, r.stderr)
			}
			if !strings.Contains(r.stderr, "--connect-timeout "+c.timeout.String()) {
				t.Errorf("stderr %q does not say that --connect-timeout %v ran out", r.stderr, c.timeout)
			}
		})
	}
}

// TestMissingDatabaseIsAConfigurationError: a URL naming a database the
// server does not have exits with EX_CONFIG, 78, as missing tables do,
// naming the database: no retry will make it appear.
func TestMissingDatabaseIsAConfigurationError(t *testing.T) {
	for _, be := range sqlBackends() {
		t.Run(be.name, func(t *testing.T) {
			u, err := url.Parse(serverURL(t, be.variable, be.toURL))
			if err != nil {
				t.Fatal(err)
			}
			db := "simba_cli_nodb" + randomHex(t)
			u.Path = "/" + db
			for _, args := range [][]string{
				{"status", "--backend", u.String(), "--timeout", "5s"},
				{"lock", "--backend", u.String(), "--timeout", "5s", "cli-nodb", "--", "true"},
				{"leader", "--backend", u.String(), "cli-nodb", "--", "true"},
			} {
				r := runSimba(t, args...)
				if r.code != exitConfig || !strings.Contains(r.stderr, db) || !strings.Contains(r.stderr, "does not exist") {
					t.Errorf("%s: exit code %d, stderr %q; want %d saying that database %s does not exist", args[0], r.code, r.stderr, exitConfig, db)
				}
				if strings.Contains(r.stderr, "--migrate") && !slices.Contains(args, "--migrate") {
					t.Errorf("%s: stderr %q suggests --migrate, which creates no database", args[0], r.stderr)
				}
			}
		})
	}
}

// TestUnencodedCharacterOfAPasswordIsNamed: a password with a raw '/'
// (or '?', '#' on Redis and MySQL) and one '@' is told to have that
// character percent-encoded, rather than to have more than one '@'; the
// password shows nowhere.
func TestUnencodedCharacterOfAPasswordIsNamed(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"redis://u:pa/ssSECRET@127.0.0.1:1/0", "a '/' in the user information must be percent-encoded, as %2F"},
		{"redis://u:pa?ssSECRET@127.0.0.1:1/0", "a '?' in the user information must be percent-encoded, as %3F"},
		{"mysql://u:pa#ssSECRET@127.0.0.1:1/db", "a '#' in the user information must be percent-encoded, as %23"},
		{"postgres://u:pa/ssSECRET@127.0.0.1:1/db", "a '/' in the user information must be percent-encoded, as %2F"},
		{"redis://u:pa@ssSECRET@127.0.0.1:1/0?x=@", "more than one '@'"},
	} {
		r := runSimba(t, "status", "--backend", tt.url)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%s: exit code %d, stderr %q; want %d and %q", tt.url, r.code, r.stderr, exitUsage, tt.want)
		}
		if strings.Contains(r.stderr, "SECRET") || strings.Contains(r.stderr, "u:pa") {
			t.Errorf("%s: the password shows: %q", tt.url, r.stderr)
		}
	}
}
