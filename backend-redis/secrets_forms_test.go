package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestOpenHidesCredentialsInEveryForm: a credential go-redis or a Redis
// deployment may carry, in the user information, in a query parameter
// (password, pass, sentinel_password, sentinelPassword, ... in any case)
// or in Options.Password, shows nowhere: not in the error of Open or of
// simba.OpenBackend, nor in any error of its chain, in any fmt verb, nor in
// the backend's log, whether the URL is unusable, the server unreachable
// or the server refuses the connection.
func TestOpenHidesCredentialsInEveryForm(t *testing.T) {
	const s = backendtest.Secret
	forms := []struct {
		name     string
		scheme   string
		userinfo string // with its '@'
		query    string
		pass     bool // the secret is in Options.Password
	}{
		{"userinfo password", "redis", ":" + s + "@", "", false},
		{"userinfo user and password", "redis", "simba:" + s + "@", "", false},
		{"password parameter", "redis", "", "password=" + s, false},
		{"password and protocol", "redis", "", "password=" + s + "&protocol=9", false},
		{"protocol and password", "redis", "", "protocol=9&password=" + s, false},
		{"Password parameter", "redis", "", "Password=" + s, false},
		{"pass parameter", "redis", "", "pass=" + s, false},
		{"sentinel_password parameter", "redis", "", "sentinel_password=" + s, false},
		{"sentinelPassword parameter", "redis", "", "sentinelPassword=" + s, false},
		{"requirepass parameter", "redis", "", "requirepass=" + s, false},
		{"encoded password parameter", "redis", "", "password=" + url.QueryEscape(s+"&x=1"), false},
		{"username and password parameters", "redis", "", "username=simba&password=" + s, false},
		{"Options.Password", "redis", "simba@", "", true},
		{"rediss password parameter", "rediss", "", "password=" + s, false},
	}
	realHost, _, _ := strings.Cut(strings.TrimPrefix(serverURL(t), "redis://"), "/")
	cases := []struct {
		name, host, path, query string
		within                  time.Duration
	}{
		{"bad database", realHost, "/notanumber", "", time.Second},
		{"bad option", realHost, "/0", "dial_timeout=bogus", time.Second},
		{"unreachable", "127.0.0.1:1", "/0", "", 200 * time.Millisecond},
		// The server answers and refuses the connection's HELLO.
		{"reachable", realHost, "/0", "protocol=9", 2 * time.Second},
	}
	for _, c := range cases {
		for _, f := range forms {
			t.Run(c.name+"/"+f.name, func(t *testing.T) {
				raw := f.scheme + "://" + f.userinfo + c.host + c.path
				if q := strings.Trim(c.query+"&"+f.query, "&"); q != "" {
					raw += "?" + q
				}
				var logs backendtest.LogBuffer
				opts := Options{Logger: logs.Logger()}
				if f.pass {
					opts.Password = s
				}
				backendtest.OpenFailsHiding(t, fmt.Sprintf("Open(%q)", raw), c.within,
					func(ctx context.Context) (io.Closer, error) { return Open(ctx, raw, opts) }, s)
				if !f.pass {
					backendtest.OpenFailsHiding(t, fmt.Sprintf("simba.OpenBackend(%q)", raw), c.within,
						func(ctx context.Context) (io.Closer, error) { return simba.OpenBackend(ctx, raw) }, s)
				}
				// go-redis reports some dial failures after Open returned.
				time.Sleep(20 * time.Millisecond)
				backendtest.NoSecretIn(t, fmt.Sprintf("Open(%q): the log", raw), logs.String(), s)
			})
		}
	}
}

// TestMaskedErrorsKeepTheirSentinels: masking keeps errors.Is and
// errors.As working on what the chain held.
func TestMaskedErrorsKeepTheirSentinels(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Open(ctx, "redis://:"+backendtest.Secret+"@127.0.0.1:1/0", Options{Logger: quiet})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unreachable: %v, want it to match context.DeadlineExceeded", err)
	}
	_, err = Open(context.Background(), "redis://127.0.0.1:1/0?password="+backendtest.Secret, Options{Logger: quiet})
	if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, simba.ErrInvalidURL) {
		t.Errorf("bad URL: %v, want it to match ErrInvalidOptions and simba.ErrInvalidURL", err)
	}
}

// TestOptionsPrintWithoutPassword: Options printed with any fmt verb, as a
// value or a pointer, or logged with slog, never shows Password.
func TestOptionsPrintWithoutPassword(t *testing.T) {
	o := Options{KeyPrefix: "app:", Username: "simba", Password: backendtest.Secret}
	backendtest.PrintsWithoutSecret(t, o, &o, backendtest.Secret, "app:", "simba")
	s := Options{KeyPrefix: "app:", SentinelUsername: "watcher", SentinelPassword: backendtest.Secret}
	backendtest.PrintsWithoutSecret(t, s, &s, backendtest.Secret, "app:", "watcher")
}

// TestOpenPrintsTheURLStructurally: the URL an error describes keeps
// every byte that is no credential (the address, dial_timeout=1s, a name
// that only speaks of passwords) and masks only the value of a credential
// parameter, however short: x_auth=1 becomes x_auth=xxxxx, nothing else.
func TestOpenPrintsTheURLStructurally(t *testing.T) {
	tests := []struct{ give, want string }{
		{"redis://127.0.0.1:1/0?dial_timeout=1s&x_auth=1",
			"redis URL redis://127.0.0.1:1/0?dial_timeout=1s&x_auth=xxxxx: "},
		{"redis://127.0.0.1:1/0?allowCleartextPasswords=1",
			"redis URL redis://127.0.0.1:1/0?allowCleartextPasswords=1: "},
		{"redis://u:" + backendtest.Secret + "@127.0.0.1:1/0?dial_timeout=1s&require_auth=md5&password=" + backendtest.Secret,
			"redis URL redis://u:xxxxx@127.0.0.1:1/0?dial_timeout=1s&require_auth=md5&password=xxxxx: "},
	}
	for _, tt := range tests {
		_, err := Open(context.Background(), tt.give, Options{Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want it to say %q", tt.give, err, tt.want)
		}
	}
}
