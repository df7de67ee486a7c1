package simbaredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// secretPasswords hold each character that has a meaning in a URL, alone
// and together, and passwords whose start reads as a port number, so that
// a URL holding them unencoded is misread rather than refused by url.Parse.
var secretPasswords = []string{
	"Qz9#Jx8Wv7",
	"Qz9/Jx8Wv7",
	"Qz9?Jx8Wv7",
	"Qz9@Jx8Wv7",
	"Qz9%Jx8Wv7",
	"Qz9%41Jx8Wv7",
	"Qz9:Jx8Wv7",
	"6380/Qz9Jx8",
	"6380#Qz9Jx8",
	"6380?Qz9Jx8",
	"Ab1#Cd2/Ef3?Gh4@Ij5%Kl6:Mn7",
}

// leakedPart returns the longest part of secret (3 bytes or more, with a
// letter in it) that text contains, or "" when there is none.
func leakedPart(text, secret string) string {
	for n := len(secret); n >= 3; n-- {
		for i := 0; i+n <= len(secret); i++ {
			part := secret[i : i+n]
			if !strings.ContainsFunc(part, unicode.IsLetter) {
				continue
			}
			if strings.Contains(text, part) {
				return part
			}
		}
	}
	return ""
}

// TestOpenErrorsHidePasswordsWithReservedCharacters: whatever the password
// holds and however it is given (raw or percent-encoded in the URL, or in
// Options.Password), no error of Open shows any part of it: not for a URL
// that cannot be used, a server that cannot be reached, or a password the
// server refuses.
func TestOpenErrorsHidePasswordsWithReservedCharacters(t *testing.T) {
	plain := startServer(t, "--requirepass", "the-right-one")
	secure := startTLSServer(t, "--requirepass", "the-right-one")
	host := func(s *privateServer) string { return fmt.Sprintf("127.0.0.1:%d", s.port) }
	paths := []struct {
		name   string
		host   map[string]string // by scheme
		path   string
		isErr  error // what the error must match when the URL was usable
		within time.Duration
	}{
		{name: "invalid URL", host: map[string]string{"redis": "127.0.0.1:6379", "rediss": "127.0.0.1:6379"},
			path: "/0/extra", isErr: ErrInvalidOptions, within: time.Second},
		// go-redis retries the dial until ctx ends.
		{name: "unreachable", host: map[string]string{"redis": "127.0.0.1:1", "rediss": "127.0.0.1:1"},
			path: "/0", within: 100 * time.Millisecond},
		{name: "wrong password", host: map[string]string{"redis": host(plain), "rediss": host(secure)},
			path: "/0", isErr: ErrAuth, within: 5 * time.Second},
	}
	forms := []struct {
		name string
		url  func(scheme, pw, rest string) string
		pass bool // the password is in Options.Password
	}{
		{name: "raw in URL", url: func(scheme, pw, rest string) string { return scheme + "://simba:" + pw + "@" + rest }},
		{name: "encoded in URL", url: func(scheme, pw, rest string) string {
			return scheme + "://" + url.UserPassword("simba", pw).String() + "@" + rest
		}},
		{name: "in Options", url: func(scheme, _, rest string) string { return scheme + "://simba@" + rest }, pass: true},
	}
	for _, scheme := range []string{"redis", "rediss"} {
		for _, p := range paths {
			for _, f := range forms {
				t.Run(scheme+"/"+p.name+"/"+f.name, func(t *testing.T) {
					t.Parallel()
					for _, pw := range secretPasswords {
						opts := Options{Logger: quiet}
						if f.pass {
							opts.Password = pw
						}
						if scheme == "rediss" {
							opts.TLSConfig = secure.tls
						}
						raw := f.url(scheme, pw, p.host[scheme]+p.path+"?max_retries=-1")
						ctx, cancel := context.WithTimeout(context.Background(), p.within)
						b, err := Open(ctx, raw, opts)
						cancel()
						if err == nil {
							_ = b.Close()
							t.Errorf("password %q: Open succeeded", pw)
							continue
						}
						if part := leakedPart(err.Error(), pw); part != "" {
							t.Errorf("the error shows %q of the password %q: %v", part, pw, err)
						}
						if f.name == "raw in URL" {
							// Refused as a URL or, for ':' and '@', the
							// path's own error: nothing else to check.
							continue
						}
						if p.isErr != nil && !errors.Is(err, p.isErr) {
							t.Errorf("password %q: %v, want %v", pw, err, p.isErr)
						}
					}
				})
			}
		}
	}
}

// TestOpenAcceptsPasswordsWithReservedCharacters: the ways Open's errors
// point to, a percent-encoded URL or Options.Password, do log in.
func TestOpenAcceptsPasswordsWithReservedCharacters(t *testing.T) {
	const pw = "Ab1#Cd2/Ef3?Gh4@Ij5%Kl6:Mn7"
	s := startServer(t, "--requirepass", pw)
	hostPort := fmt.Sprintf("127.0.0.1:%d", s.port)
	for _, tt := range []struct {
		name string
		url  string
		opts Options
	}{
		{name: "encoded in URL", url: "redis://" + url.UserPassword("", pw).String() + "@" + hostPort + "/0"},
		{name: "in Options", url: "redis://" + hostPort + "/0", opts: Options{Password: pw}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Logger = quiet
			b := openBackend(t, tt.url, tt.opts)
			if _, err := b.OpenSession(callCtx(t), time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOpenRefusesAmbiguousURLs: a URL whose user information a reserved
// character moved is refused, with an error that quotes nothing of it and
// says how to write it.
func TestOpenRefusesAmbiguousURLs(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "redis://u:6380/Qz9Jx8@127.0.0.1:6379/0", want: "cannot tell its user information from the rest"},
		{give: "redis://u:6380?Qz9Jx8@127.0.0.1:6379/0", want: "cannot tell its user information from the rest"},
		{give: "redis://u:6380#Qz9Jx8@127.0.0.1:6379/0", want: "cannot tell its user information from the rest"},
		{give: "redis:u:Qz9Jx8@127.0.0.1:6379/0", want: "cannot tell its user information from the rest"},
		{give: "redis://u:Qz9#Jx8@127.0.0.1:6379/0", want: "not a valid URL"},
		{give: "redis://u:Qz9%Jx8@127.0.0.1:6379/0", want: "a '%' not followed by two hexadecimal digits"},
		{give: "redis://u:Qz9Jx8@127.0.0.1:6379/0#frag", want: "cannot tell its user information from the rest"},
	}
	for _, tt := range tests {
		_, err := Open(context.Background(), tt.give, Options{Logger: quiet})
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOptions", tt.give, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.want) || !strings.Contains(msg, "Options.Password") {
			t.Errorf("Open(%q) = %q, want it to say %q and point to Options.Password", tt.give, msg, tt.want)
		}
		if strings.Contains(msg, "Qz9") || strings.Contains(msg, "Jx8") || strings.Contains(msg, "6380") {
			t.Errorf("Open(%q) = %q: it quotes the URL", tt.give, msg)
		}
	}
}

// records is a slog handler that keeps the messages it is given.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Level.String()+" "+rec.Message)
	return nil
}

func (r *records) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// TestGoRedisLogsGoToTheBackendLogger: go-redis's own lines (here its
// report of failed dials during Open) reach Options.Logger instead of the
// standard error.
func TestGoRedisLogsGoToTheBackendLogger(t *testing.T) {
	got := &records{}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Open(ctx, "redis://127.0.0.1:1/0?max_retries=-1", Options{Logger: slog.New(got), Password: "Qz9#Jx8/Wv7"})
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	// go-redis reports it from its dialing goroutine, once Open gave up.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(got.all(), "DEBUG simbaredis: go-redis: connection pool: failed to dial"); {
		if time.Now().After(deadline) {
			t.Fatalf("go-redis's report of the failed dials did not reach Options.Logger within 5s; got:\n%s", got.all())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGoRedisLogsAreMasked: every line go-redis logs passes through the
// router, whatever it holds, and a password an open Backend knows is
// masked in it. A Backend with KeepDriverLogger takes no part.
func TestGoRedisLogsAreMasked(t *testing.T) {
	const pw = "Qz9#Jx8/Wv7"
	got := &records{}
	b := openBackend(t, serverURL(t), Options{Logger: slog.New(got), Password: pw})
	// As go-redis would call the logger it was given (redis.SetLogger).
	driverLogs.Printf(context.Background(), "redis: re-authentication failed: bad password %s (%s)", pw, url.QueryEscape(pw))
	if part := leakedPart(got.all(), pw); part != "" {
		t.Fatalf("a go-redis line shows %q of the password:\n%s", part, got.all())
	}
	if !strings.Contains(got.all(), "DEBUG simbaredis: go-redis: re-authentication failed: bad password xxxxx (xxxxx)") {
		t.Fatalf("the line did not reach Options.Logger masked; got:\n%s", got.all())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	kept := openBackend(t, serverURL(t), Options{Logger: quiet, KeepDriverLogger: true})
	if kept.driverLog != nil {
		t.Fatal("a Backend with KeepDriverLogger registered a go-redis log sink")
	}
}

// TestGoRedisLogsWithoutBackend: before any Backend, the router writes
// go-redis's lines to the standard error as go-redis does; after the last
// one closed, to that one's Logger.
func TestGoRedisLogsWithoutBackend(t *testing.T) {
	var buf bytes.Buffer
	r := &driverLogRouter{fallback: log.New(&buf, "redis: ", 0), sinks: map[*driverLogSink]struct{}{}}
	r.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
	if got, want := buf.String(), "redis: connection pool: failed to dial after 5 attempts\n"; got != want {
		t.Fatalf("fallback wrote %q, want %q", got, want)
	}
	got := &records{}
	sink := &driverLogSink{log: slog.New(got), secrets: []string{"Qz9Jx8"}}
	r.install.Do(func() {}) // this router must not become go-redis's logger
	r.add(sink)
	r.remove(sink)
	r.Printf(context.Background(), "redis: failed to close connection: %s", "Qz9Jx8")
	if want := "DEBUG simbaredis: go-redis: failed to close connection: xxxxx"; got.all() != want {
		t.Fatalf("after the last Backend closed the router logged %q, want %q", got.all(), want)
	}
}
