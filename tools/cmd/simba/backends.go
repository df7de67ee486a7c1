package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	simbasql "github.com/simba-go/simba/backend-jdbc"
	simbaredis "github.com/simba-go/simba/backend-redis"
	simbazk "github.com/simba-go/simba/backend-zk"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// backendOptions are the settings a URL does not carry.
type backendOptions struct {
	migrate bool         // SQL: create the tables when missing
	logger  *slog.Logger // the backend's own records; never nil
}

// backendKind opens the URLs of some schemes.
type backendKind struct {
	schemes []string
	example string
	// open returns the backend and the function that frees it. Errors
	// about the URL itself are wrapped in a *badURLError.
	open func(ctx context.Context, rawURL string, o backendOptions) (simba.Backend, func() error, error)
}

// backendKinds is the registry of the backends simba links.
var backendKinds = []backendKind{
	{[]string{"memory"}, "memory://[NAME]", openMemory},
	{[]string{"redis", "rediss"}, "redis://[USER:PASSWORD@]HOST[:PORT][/DB]", openRedis},
	{[]string{"postgres", "postgresql", "mysql"}, "postgres://USER[:PASSWORD]@HOST[:PORT]/DB", openSQL},
	{[]string{"zk"}, "zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/CHROOT]", openZK},
}

// badURLError reports a backend URL that cannot be used as written: a
// usage error, unlike a server that cannot be reached.
type badURLError struct{ err error }

func (e *badURLError) Error() string { return e.err.Error() }
func (e *badURLError) Unwrap() error { return e.err }

func badURL(format string, args ...any) error {
	return &badURLError{fmt.Errorf(format, args...)}
}

// openBackend opens the backend of rawURL. Its errors never contain a
// password.
func openBackend(ctx context.Context, rawURL string, o backendOptions) (simba.Backend, func() error, error) {
	u := parseBackendURL(rawURL)
	if u.scheme == "" {
		if scheme, _, ok := strings.Cut(rawURL, ":"); ok {
			if k := kindOf(scheme); k != nil {
				// memory: or redis:host: the scheme without "//".
				return nil, nil, badURL("backend URL %q: missing \"//\" after \"%s:\": want %s",
					u.redactedString(), scheme, k.example)
			}
		}
		return nil, nil, badURL("backend URL %q has no scheme: want one of %s", u.redactedString(), schemeList())
	}
	kind := kindOf(u.scheme)
	if kind == nil {
		return nil, nil, badURL("unknown backend scheme %q: want one of %s", u.scheme, schemeList())
	}
	if err := checkURL(u); err != nil {
		return nil, nil, err
	}
	if err := checkAddresses(u); err != nil {
		return nil, nil, err
	}
	return kind.open(ctx, rawURL, o)
}

// kindOf returns the backend kind of scheme, in any case, or nil.
func kindOf(scheme string) *backendKind {
	for i, k := range backendKinds {
		if slices.Contains(k.schemes, strings.ToLower(scheme)) {
			return &backendKinds[i]
		}
	}
	return nil
}

// checkAddresses checks the hosts and ports of a redis://, rediss://,
// mysql:// or postgres:// URL before any dial, so that a typing error is
// bad usage rather than an unreachable backend. A URL that url.Parse
// refuses was refused by checkURL already, or is postgres://, which pgx
// parses and checks itself; zk:// servers are checked by openZK.
func checkAddresses(u backendURL) error {
	switch strings.ToLower(u.scheme) {
	case "redis", "rediss", "mysql", "postgres", "postgresql":
	default:
		return nil
	}
	pu, err := url.Parse(u.raw)
	if err != nil {
		return nil
	}
	hosts := []string{pu.Host}
	if s := strings.ToLower(u.scheme); s == "postgres" || s == "postgresql" {
		hosts = strings.Split(pu.Host, ",") // pgx takes several HOST[:PORT]
	}
	for _, hp := range hosts {
		host, port := hp, ""
		if i := strings.LastIndexByte(hp, ':'); i >= 0 && !strings.HasSuffix(hp, "]") {
			host, port = hp[:i], hp[i+1:]
		}
		if err := checkHostPort(host, port); err != nil {
			return badURL("backend URL %s: %v", u.redactedString(), err)
		}
	}
	return nil
}

// checkHostPort checks a host and a port as a URL gives them: a host name,
// an IPv4 address or a bracketed IPv6 address, and a decimal port from 1
// to 65535. Either may be empty: the driver's default applies.
func checkHostPort(host, port string) error {
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: want a number from 1 to 65535", port)
		}
	}
	if host == "" {
		return nil
	}
	if ip, ok := strings.CutPrefix(host, "["); ok {
		ip, ok = strings.CutSuffix(ip, "]")
		ip, _, _ = strings.Cut(ip, "%") // a zone: fe80::1%eth0
		if !ok || net.ParseIP(ip) == nil || !strings.Contains(ip, ":") {
			return fmt.Errorf("host %q: not an IPv6 address", host)
		}
		return nil
	}
	if !validHostName(host) {
		return fmt.Errorf("host %q: not a host name or IP address", host)
	}
	return nil
}

// validHostName reports whether h is an IPv4 address or a DNS name:
// labels of letters, digits, '-' and '_', 1 to 63 bytes each, an optional
// final dot, and a last label that is not all digits (1.2.3.4.5 is a
// mistyped address, not a name).
func validHostName(h string) bool {
	if ip := net.ParseIP(h); ip != nil {
		return ip.To4() != nil
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	digits := false
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		digits = true
		for _, r := range label {
			switch {
			case '0' <= r && r <= '9':
			case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', r == '-', r == '_':
				digits = false
			default:
				return false
			}
		}
	}
	return !digits
}

// checkURL refuses the URLs whose credentials a driver would misread, and
// so could print in part: an ambiguous '@', or a bad percent-escape, which
// url.Parse would quote. Other errors of url.Parse name the host or the
// port only, the user information being unambiguous. pgx parses
// postgres:// URLs itself and masks the password in its errors.
func checkURL(u backendURL) error {
	if u.ambiguous {
		return badURL("backend URL %s: the user information may end at more than one '@': percent-encode "+
			"'@', '/', '?', '#' and '%%' in a password (%%40, %%2F, %%3F, %%23, %%25) and '@' in the path or query",
			u.redactedString())
	}
	switch strings.ToLower(u.scheme) {
	case "zk", "postgres", "postgresql":
		return nil
	}
	_, err := url.Parse(u.raw)
	var escape url.EscapeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &escape):
		return badURL("backend URL %s: invalid percent-escape: write '%%' as %%25", u.redactedString())
	default:
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL it repeats
		}
		return badURL("backend URL %s: %v", u.redactedString(), err)
	}
}

func schemeList() string {
	var all []string
	for _, k := range backendKinds {
		for _, s := range k.schemes {
			all = append(all, s+"://")
		}
	}
	return strings.Join(all, ", ")
}

// memoryStores holds the in-process stores of memory:// URLs by name, so
// that every client of one process naming the same store shares it.
var memoryStores = struct {
	sync.Mutex
	m map[string]*memory.Server
}{m: make(map[string]*memory.Server)}

// memoryStore returns the in-process store called name, creating it.
func memoryStore(name string) *memory.Server {
	memoryStores.Lock()
	defer memoryStores.Unlock()
	s := memoryStores.m[name]
	if s == nil {
		s = memory.New()
		memoryStores.m[name] = s
	}
	return s
}

func openMemory(_ context.Context, rawURL string, _ backendOptions) (simba.Backend, func() error, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, badURL("memory URL %q: not a valid URL", redactURL(rawURL))
	}
	if u.User != nil || u.Port() != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, nil, badURL("memory URL %q: want memory:// or memory://NAME", redactURL(rawURL))
	}
	return memoryStore(u.Hostname()).Connect(), func() error { return nil }, nil
}

// redisLog receives the go-redis client's own messages (failed dials,
// dropped connections) at debug level, instead of the standard logger,
// which would print them on stderr whatever --verbose says. go-redis has
// one logger per process; the last opened backend's logger gets them.
var redisLog struct {
	once   sync.Once
	logger atomic.Pointer[slog.Logger]
}

type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l := redisLog.logger.Load(); l != nil {
		l.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
	}
}

func openRedis(ctx context.Context, rawURL string, o backendOptions) (simba.Backend, func() error, error) {
	redisLog.logger.Store(o.logger)
	redisLog.once.Do(func() { redis.SetLogger(redisLogger{}) })
	b, err := simbaredis.Open(ctx, rawURL, simbaredis.Options{Logger: o.logger})
	if errors.Is(err, simbaredis.ErrInvalidOptions) {
		return nil, nil, &badURLError{err}
	}
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}

func openSQL(ctx context.Context, rawURL string, o backendOptions) (simba.Backend, func() error, error) {
	b, err := simbasql.Open(ctx, rawURL, simbasql.Options{Migrate: o.migrate, Logger: o.logger})
	switch {
	case errors.Is(err, simbasql.ErrInvalidOptions):
		return nil, nil, &badURLError{err}
	case errors.Is(err, simbasql.ErrSchemaMissing):
		return nil, nil, fmt.Errorf("%w (run simba with --migrate once to create them)", err)
	case err != nil:
		return nil, nil, err
	}
	return b, b.Close, nil
}

// openZK opens zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/CHROOT]; the
// user information is a digest identity, taken literally up to the last
// '@', so that a password may hold any character. It checks that one
// server accepts a connection, since the backend itself dials only when a
// session opens.
func openZK(ctx context.Context, rawURL string, o backendOptions) (simba.Backend, func() error, error) {
	_, connect, _ := strings.Cut(rawURL, "://")
	opts := simbazk.Options{Logger: o.logger}
	if at := strings.LastIndexByte(connect, '@'); at >= 0 {
		opts.Auth, connect = connect[:at], connect[at+1:]
		if user, _, ok := strings.Cut(opts.Auth, ":"); !ok || user == "" {
			return nil, nil, badURL("zk URL %s: user information must be USER:PASSWORD", redactURL(rawURL))
		}
	}
	if strings.ContainsAny(connect, "?#") {
		return nil, nil, badURL("zk URL %s: query parameters are not supported", redactURL(rawURL))
	}
	servers, _, err := simbazk.ParseConnectString(connect)
	if err != nil {
		return nil, nil, &badURLError{err}
	}
	for _, s := range servers {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return nil, nil, badURL("zk URL %s: server %q: want HOST:PORT", redactURL(rawURL), s)
		}
		if strings.Contains(host, ":") {
			host = "[" + host + "]" // SplitHostPort took the brackets off
		}
		if err := checkHostPort(host, port); err != nil {
			return nil, nil, badURL("zk URL %s: server %q: %v", redactURL(rawURL), s, err)
		}
	}
	// Open checks that a server answers a Zookeeper connect request within ctx.
	b, err := simbazk.Open(ctx, connect, opts)
	switch {
	case errors.Is(err, simbazk.ErrInvalidOptions):
		return nil, nil, &badURLError{err}
	case err != nil:
		return nil, nil, err
	}
	return b, b.Close, nil
}
