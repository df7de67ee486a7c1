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

	"github.com/simba-go/simba/core/backendtest"
)

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
	if part := backendtest.LeakedPart(got.all(), pw); part != "" {
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
