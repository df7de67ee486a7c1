package simbaredis

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// urlHint tells how to write a password that a URL would misread.
const urlHint = backendkit.PercentEncodeHint + " or pass them in Options.Username and Options.Password"

// urlError is a URL Open cannot use. It reads as err and matches err's
// sentinels and simba.ErrInvalidURL, which simba.OpenBackend's callers
// test for.
type urlError struct{ err error }

func (e *urlError) Error() string   { return e.err.Error() }
func (e *urlError) Unwrap() []error { return []error{e.err, simba.ErrInvalidURL} }

func invalidURL(err error) error { return &urlError{err} }

// driverLogs receives go-redis's own log lines, which go-redis sends to one
// logger for the whole process (redis.SetLogger), and hands them, with
// every known password masked, to the Logger of each open Backend that
// did not keep go-redis's logger. go-redis logs some lines from goroutines
// of its own after the call that caused them returned (a failed dial
// during Open, reported once Open gave up), so while no such Backend is
// open, lines go to the Logger of the one closed last.
var driverLogs = &driverLogRouter{
	fallback: log.New(os.Stderr, "redis: ", log.LstdFlags),
	sinks:    map[*driverLogSink]struct{}{},
}

type driverLogRouter struct {
	install  sync.Once
	fallback *log.Logger // before any sink was added

	mu    sync.Mutex
	sinks map[*driverLogSink]struct{}
	last  *driverLogSink // the sink removed last
}

// driverLogSink is one Backend's logger and the passwords it knows.
type driverLogSink struct {
	log     *slog.Logger
	secrets []string
}

// add registers a sink, installing the router as go-redis's logger the
// first time. remove unregisters it; a nil sink, or one not registered,
// changes nothing.
func (r *driverLogRouter) add(s *driverLogSink) {
	r.install.Do(func() { redis.SetLogger(r) })
	r.mu.Lock()
	r.sinks[s] = struct{}{}
	r.mu.Unlock()
}

func (r *driverLogRouter) remove(s *driverLogSink) {
	r.mu.Lock()
	if _, ok := r.sinks[s]; ok {
		delete(r.sinks, s)
		r.last = s
	}
	r.mu.Unlock()
}

// Printf implements go-redis's logging interface. go-redis does not say
// which client a line is about, so every open Backend's logger gets it
// (once per distinct *slog.Logger), at level Debug: go-redis repeats its
// lines for every retry (a failed dial, each round), and the failures
// that matter reach the engine as errors anyway.
func (r *driverLogRouter) Printf(ctx context.Context, format string, v ...any) {
	r.mu.Lock()
	var secrets []string
	var loggers []*slog.Logger
	for s := range r.sinks {
		secrets = append(secrets, s.secrets...)
		if !slices.Contains(loggers, s.log) {
			loggers = append(loggers, s.log)
		}
	}
	if r.last != nil {
		secrets = append(secrets, r.last.secrets...)
		if len(loggers) == 0 {
			loggers = append(loggers, r.last.log)
		}
	}
	r.mu.Unlock()
	msg := backendkit.MaskText(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), secrets)
	if len(loggers) == 0 {
		r.fallback.Print(msg)
		return
	}
	for _, l := range loggers { // slog reads a nil ctx as context.Background()
		l.Log(ctx, slog.LevelDebug, "simbaredis: go-redis: "+msg)
	}
}
