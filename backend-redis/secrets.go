package simbaredis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// mask is what replaces a secret in a message.
const mask = "xxxxx"

// urlHint tells how to write a password that a URL would misread.
const urlHint = "percent-encode the user name and password (@ %40, : %3A, / %2F, ? %3F, # %23, % %25) " +
	"or pass them in Options.Username and Options.Password"

// parseRedisURL parses rawURL for Open. It refuses a URL whose parts a
// password holding an unencoded '/', '?', '#' or '@' would have moved: an
// '@' after the host (in the path or the query), a fragment, or no "//"
// at all. Its errors never contain any part of rawURL: url.Parse's own
// errors quote the offending part, which may be part of the password.
func parseRedisURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalidURL(fmt.Errorf("%w: redis URL: %s; %s", ErrInvalidOptions, urlProblem(err), urlHint))
	}
	if u.Opaque != "" || strings.Contains(rawURL, "#") ||
		strings.Contains(u.EscapedPath(), "@") || strings.Contains(u.RawQuery, "@") {
		return nil, invalidURL(fmt.Errorf("%w: redis URL: cannot tell its user information from the rest; %s", ErrInvalidOptions, urlHint))
	}
	return u, nil
}

// urlError is a URL Open cannot use. It reads as err and matches err's
// sentinels and simba.ErrInvalidURL, which simba.OpenBackend's callers
// test for.
type urlError struct{ err error }

func (e *urlError) Error() string   { return e.err.Error() }
func (e *urlError) Unwrap() []error { return []error{e.err, simba.ErrInvalidURL} }

func invalidURL(err error) error { return &urlError{err} }

// urlProblem names what url.Parse refused, without quoting the URL.
func urlProblem(err error) string {
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(err, &esc):
		return "a '%' not followed by two hexadecimal digits"
	case errors.As(err, &host):
		return "an invalid character in the host"
	}
	return "not a valid URL"
}

// secretKey reports whether a query parameter named key may hold a
// credential: after lower-casing and dropping '_', '-' and '.', a name that
// contains "pass" or "pwd" (password, pass, passwd, sentinel_password,
// sentinelPassword, requirepass, sslpassword ...), "secret", "token",
// "credential" or "auth". go-redis's own parser takes none of
// them for a plain URL, and refuses them by name only; a printed URL masks
// their values anyway, since a misspelt or future parameter is written by
// someone who meant it.
func secretKey(key string) bool {
	k := strings.NewReplacer("_", "", "-", "", ".", "").Replace(strings.ToLower(key))
	for _, part := range []string{"pass", "pwd", "secret", "token", "credential", "auth"} {
		if strings.Contains(k, part) {
			return true
		}
	}
	return false
}

// queryPairs splits a raw query into its pairs, as url.ParseQuery does,
// and calls f with each key and value, raw and unescaped (each as written
// when it cannot be unescaped); hasValue tells "key=" from "key".
func queryPairs(rawQuery string, f func(rawKey, rawValue, key, value string, hasValue bool)) {
	if rawQuery == "" {
		return
	}
	for _, pair := range strings.Split(rawQuery, "&") {
		rawKey, rawValue, hasValue := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			key = rawKey
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			value = rawValue
		}
		f(rawKey, rawValue, key, value, hasValue)
	}
}

// redactedURL is u fit to print: its password and the values of its
// credential parameters (secretKey) replaced by xxxxx.
func redactedURL(u *url.URL) string {
	c := *u
	var pairs []string
	queryPairs(u.RawQuery, func(rawKey, rawValue, key, _ string, hasValue bool) {
		switch {
		case !hasValue:
			pairs = append(pairs, rawKey)
		case secretKey(key):
			pairs = append(pairs, rawKey+"="+mask)
		default:
			pairs = append(pairs, rawKey+"="+rawValue)
		}
	})
	c.RawQuery = strings.Join(pairs, "&")
	return c.Redacted()
}

// urlSecrets returns the password of u and the values of its credential
// parameters, as written and unescaped.
func urlSecrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	queryPairs(u.RawQuery, func(_, rawValue, key, value string, _ bool) {
		if secretKey(key) {
			out = append(out, rawValue, value)
		}
	})
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// maskSecrets replaces in s every secret, as it is and percent-encoded the
// ways a URL may hold it.
func maskSecrets(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		forms := []string{sec, url.QueryEscape(sec), url.PathEscape(sec), url.User(sec).String()}
		slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
		for _, f := range forms {
			s = strings.ReplaceAll(s, f, mask)
		}
	}
	return s
}

// showsSecret reports whether any text err or the errors of its chain
// show (Error, %+v, %#v) holds a secret.
func showsSecret(err error, secrets []string) bool {
	if err == nil {
		return false
	}
	for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if maskSecrets(text, secrets) != text {
			return true
		}
	}
	return slices.ContainsFunc(unwrapped(err), func(e error) bool { return showsSecret(e, secrets) })
}

// unwrapped returns the errors err wraps, one or several.
func unwrapped(err error) []error {
	switch u := err.(type) { //nolint:errorlint // one level of the chain, walked by the callers
	case interface{ Unwrap() error }:
		if x := u.Unwrap(); x != nil {
			return []error{x}
		}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// maskedError shows err's message with every secret masked. Its chain
// holds err's: each error of it that shows no secret, anywhere in its own
// chain, as it is, so that errors.Is and errors.As find the sentinels and
// the driver's values; the others masked the same way.
type maskedError struct {
	err     error
	secrets []string
}

func (e *maskedError) Error() string { return maskSecrets(e.err.Error(), e.secrets) }

// GoString keeps %#v from printing the fields, secrets included.
func (e *maskedError) GoString() string {
	return "simbaredis.maskedError(" + strconv.Quote(e.Error()) + ")"
}

// Is reports whether err's chain matches target: a yes or no shows
// nothing of it.
func (e *maskedError) Is(target error) bool { return errors.Is(e.err, target) }

func (e *maskedError) Unwrap() []error {
	inner := unwrapped(e.err)
	out := make([]error, 0, len(inner))
	for _, x := range inner {
		if x != nil {
			out = append(out, withMask(x, e.secrets))
		}
	}
	return out
}

// withMask returns err, with secrets masked in everything it and its chain
// show; err itself when it shows none.
func withMask(err error, secrets []string) error {
	secrets = slices.DeleteFunc(slices.Clone(secrets), func(s string) bool { return s == "" })
	if err == nil || len(secrets) == 0 || !showsSecret(err, secrets) {
		return err
	}
	return &maskedError{err: err, secrets: secrets}
}

// clientSecrets returns the passwords a go-redis client was configured
// with, when its type tells.
func clientSecrets(client redis.UniversalClient) []string {
	var out []string
	switch c := client.(type) {
	case *redis.Client:
		out = append(out, c.Options().Password)
	case *redis.ClusterClient:
		out = append(out, c.Options().Password)
	case *redis.Ring:
		out = append(out, c.Options().Password)
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

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
// first time. remove unregisters it.
func (r *driverLogRouter) add(s *driverLogSink) {
	r.install.Do(func() { redis.SetLogger(r) })
	r.mu.Lock()
	r.sinks[s] = struct{}{}
	r.mu.Unlock()
}

func (r *driverLogRouter) remove(s *driverLogSink) {
	if s == nil {
		return
	}
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
	msg := maskSecrets(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "), secrets)
	if len(loggers) == 0 {
		r.fallback.Print(msg)
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	for _, l := range loggers {
		l.Log(ctx, slog.LevelDebug, "simbaredis: go-redis: "+msg)
	}
}
