package simbaredis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/simba-go/simba/core/backendkit"
)

// DefaultKeyPrefix is the key prefix used when Options.KeyPrefix is empty.
const DefaultKeyPrefix = "simba:"

// MaxKeyPrefixLength is the longest key prefix accepted, in bytes.
const MaxKeyPrefixLength = 64

// ErrInvalidOptions is matched (with errors.Is) by every error New and Open
// return for an Options field that is out of bounds.
var ErrInvalidOptions = errors.New("simbaredis: invalid options")

// Options configures a Backend. The zero value is ready to use: every field
// has a documented default.
type Options struct {
	// KeyPrefix is prepended to every key Simba writes and to the release
	// channel. Default "simba:" (DefaultKeyPrefix).
	//
	// It must be 1 to 64 bytes of printable ASCII without spaces. Braces
	// are allowed only as one Redis Cluster hash tag, for example
	// "{simba}:": every Simba key then maps to the same hash slot, which a
	// Redis Cluster (or a go-redis Ring) requires because each operation is
	// one script over several keys. The price is that all of Simba's keys
	// and load sit on the one shard that owns that slot.
	KeyPrefix string

	// Logger receives the backend's warnings (see Warning for their
	// levels) and, unless KeepDriverLogger
	// is set, go-redis's own log lines (failed dials, connection pool and
	// pub/sub trouble) at level Debug, prefixed "simbaredis: go-redis: ".
	// No line carries a password the Backend knows (from Options, the URL
	// given to Open, or the client given to New). Default slog.Default().
	Logger *slog.Logger

	// KeepDriverLogger leaves go-redis's logger alone. go-redis has one
	// logger for the whole process (redis.SetLogger), which writes to the
	// standard error. By default the first Backend replaces it with one
	// that hands each line to the Logger of every open Backend (go-redis
	// does not say which client a line is about) or, while none is open,
	// of the one closed last (go-redis reports some failures, such as the
	// failed dials of an Open, after the call returned), with the
	// passwords those Backends know masked. Set it when the application
	// installs its own go-redis logger; one installed after the first
	// Backend replaces Simba's. Default false.
	KeepDriverLogger bool

	// OnWarning, when set, is called once for every distinct operational
	// warning the backend detects (see Warning), after it was logged. It
	// must not block; it may be called from any goroutine.
	OnWarning func(Warning)

	// TLSConfig, used by Open only, enables TLS with this configuration,
	// for redis:// URLs too. Default: no TLS for redis:// URLs, and for
	// rediss:// URLs TLS 1.2+ verifying the URL's host name.
	TLSConfig *tls.Config

	// MinReplicas, when above 0, makes every Acquire and KeepAlive wait in
	// the same round trip (Redis WAIT) until that many replicas
	// acknowledged its write, for at most ReplicaTimeout. An Acquire that
	// won a term fewer replicas acknowledged gives it back (releases it
	// with its token) and fails with an error matching ErrNotReplicated,
	// which the engine treats as a failed attempt and tries again; a
	// KeepAlive fails the same way, so the engine does not extend the
	// session's validity from it. Release, JoinGroup, LeaveGroup and
	// CloseSession do not wait (ADR 0021). WAIT is not consensus: a
	// failover may still promote a replica that missed the write; with
	// one replica and MinReplicas 1, it is that replica. Default 0: no
	// wait. Open also reads it from the URL's min_replicas parameter. Not
	// available on a Ring client.
	MinReplicas int

	// ReplicaTimeout bounds each wait for MinReplicas acknowledgements,
	// in whole milliseconds: at least 1ms, and shorter than the engine's
	// call deadline (the renew period) so that a missing acknowledgement
	// is reported as such. Default 100ms when MinReplicas is set; it must
	// be zero when MinReplicas is not. Open also reads it from the URL's
	// replica_timeout parameter (a Go duration, such as 50ms).
	ReplicaTimeout time.Duration

	// Username and Password, used by Open only, authenticate the
	// connection (Redis 6 ACL user, or the legacy requirepass password when
	// Username is empty). When set they replace the user information of the
	// URL, which keeps secrets out of URLs. Default: taken from the URL.
	Username string
	Password string

	// SentinelUsername and SentinelPassword, used by Open only with a
	// redis+sentinel URL, authenticate the connections to the sentinels,
	// replacing the URL's sentinel_username and sentinel_password.
	// Default: taken from the URL; none when it has none.
	SentinelUsername string
	SentinelPassword string
}

// withDefaults returns o with its defaults filled in, or an error naming
// the first field out of bounds.
func (o Options) withDefaults() (Options, error) {
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if err := validatePrefix(o.KeyPrefix); err != nil {
		return o, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.MinReplicas < 0:
		return o, fmt.Errorf("%w: MinReplicas %d: must not be negative", ErrInvalidOptions, o.MinReplicas)
	case o.MinReplicas == 0 && o.ReplicaTimeout != 0:
		return o, fmt.Errorf("%w: ReplicaTimeout %v without MinReplicas", ErrInvalidOptions, o.ReplicaTimeout)
	case o.MinReplicas > 0 && o.ReplicaTimeout == 0:
		o.ReplicaTimeout = DefaultReplicaTimeout
	case o.MinReplicas > 0 && o.ReplicaTimeout < time.Millisecond:
		return o, fmt.Errorf("%w: ReplicaTimeout %v: must be at least 1ms", ErrInvalidOptions, o.ReplicaTimeout)
	}
	return o, nil
}

// DefaultReplicaTimeout is Options.ReplicaTimeout when MinReplicas is set
// and ReplicaTimeout is not.
const DefaultReplicaTimeout = 100 * time.Millisecond

func validatePrefix(p string) error {
	bad := func(reason string) error {
		return fmt.Errorf("%w: KeyPrefix %q: %s", ErrInvalidOptions, p, reason)
	}
	if len(p) > MaxKeyPrefixLength {
		return bad(fmt.Sprintf("%d bytes, at most %d allowed", len(p), MaxKeyPrefixLength))
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c > '~' {
			return bad(fmt.Sprintf("byte %d (%q) is not printable ASCII without spaces", i, rune(c)))
		}
	}
	if strings.ContainsAny(p, "{}") && !hasHashTag(p) {
		return bad(`braces must form one non-empty hash tag, like "{simba}:"`)
	}
	return nil
}

// hasHashTag reports whether keys starting with p hash by a tag inside p,
// following Redis Cluster's rule: the bytes between the first '{' and the
// first '}' after it, when there is at least one.
func hasHashTag(p string) bool {
	_, tag, ok := strings.Cut(p, "{")
	return ok && strings.IndexByte(tag, '}') > 0
}

// String describes o with Password and SentinelPassword shown as
// "redacted" when set.
func (o Options) String() string {
	return fmt.Sprintf("simbaredis.Options{KeyPrefix:%q Logger:%t KeepDriverLogger:%t OnWarning:%t MinReplicas:%d ReplicaTimeout:%v TLSConfig:%t Username:%q Password:%s SentinelUsername:%q SentinelPassword:%s}",
		o.KeyPrefix, o.Logger != nil, o.KeepDriverLogger, o.OnWarning != nil, o.MinReplicas, o.ReplicaTimeout,
		o.TLSConfig != nil, o.Username, backendkit.Redacted(o.Password), o.SentinelUsername, backendkit.Redacted(o.SentinelPassword))
}

// GoString is String, so that %#v does not print the password either.
func (o Options) GoString() string { return o.String() }

// LogValue makes slog print o with Password and SentinelPassword redacted.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("key_prefix", o.KeyPrefix),
		slog.Bool("keep_driver_logger", o.KeepDriverLogger),
		slog.Int("min_replicas", o.MinReplicas),
		slog.Duration("replica_timeout", o.ReplicaTimeout),
		slog.Bool("tls", o.TLSConfig != nil),
		slog.String("username", o.Username),
		slog.String("password", backendkit.Redacted(o.Password)),
		slog.String("sentinel_username", o.SentinelUsername),
		slog.String("sentinel_password", backendkit.Redacted(o.SentinelPassword)),
	)
}
