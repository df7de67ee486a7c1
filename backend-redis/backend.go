package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

var (
	_ simba.Backend         = (*Backend)(nil)
	_ simba.ReleaseNotifier = (*Backend)(nil)
	_ simba.OpenedBackend   = (*Backend)(nil)
	_ simba.HolderReader    = (*Backend)(nil)
	_ simba.IdentityOpener  = (*Backend)(nil)
	_ simba.Sweeper         = (*Backend)(nil)
	_ simba.HolderLister    = (*Backend)(nil)
	_ simba.PermitAcquirer  = (*Backend)(nil)
)

// Backend is the Redis implementation of simba.Backend,
// simba.ReleaseNotifier, simba.HolderReader, simba.IdentityOpener and
// simba.PermitAcquirer. Every session operation is one atomic Lua script on
// the server (a single round trip). All methods are safe for concurrent use
// and return soon after their context is done, provided the client honours
// context deadlines (Open makes sure of it; see New).
type Backend struct {
	client        redis.UniversalClient
	ownsClient    bool
	prefix        string
	channel       string
	log           *slog.Logger
	onWarning     func(Warning)
	notify        *notifier
	batch         coalescer  // acquire and release calls sent together
	checks        heldChecks // which held leases the next keep-alive of a session checks
	closed        atomic.Bool
	checkMu       sync.Mutex     // checkServer
	serverChecked atomic.Bool    // checkServer read the server's set-up
	driverLog     *driverLogSink // nil with Options.KeepDriverLogger

	warnMu   sync.Mutex
	warnings []Warning
}

// New returns a Backend over client, which stays the caller's: Close does
// not close it. Standalone and Sentinel (failover) clients work with any key
// prefix; a *redis.ClusterClient or *redis.Ring needs a prefix with a hash
// tag (such as "{simba}:") so that every key of an operation lives in one
// slot, and New fails without one.
//
// The engine bounds every call with a context deadline; go-redis honours it
// only when the client was built with ContextTimeoutEnabled. Without it a
// call against an unresponsive server lasts until the client's read timeout,
// and New records a WarnContextTimeouts warning.
//
// Unless opts.KeepDriverLogger is set, go-redis's own log lines go to
// opts.Logger from then on (see Options.KeepDriverLogger), with the
// client's password masked.
//
// New does not contact the server. It fails only on a nil client or
// invalid options (errors.Is(err, ErrInvalidOptions)).
func New(client redis.UniversalClient, opts Options) (*Backend, error) {
	return newBackend(client, opts, nil)
}

// newBackend is New; secrets are the credentials of the URL and the
// Options that Open made client from, which go-redis's log lines are
// masked of, as well as the client's own password.
func newBackend(client redis.UniversalClient, opts Options, secrets []string) (*Backend, error) {
	if isNil(client) {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	switch client.(type) {
	case *redis.ClusterClient, *redis.Ring:
		if !hasHashTag(o.KeyPrefix) {
			return nil, fmt.Errorf("%w: KeyPrefix %q: a cluster or ring client needs a hash tag in the prefix, like \"{simba}:\"",
				ErrInvalidOptions, o.KeyPrefix)
		}
	}
	if _, ring := client.(*redis.Ring); ring && o.MinReplicas > 0 {
		return nil, fmt.Errorf("%w: MinReplicas with a Ring client: its shards have no replicas Simba could wait for", ErrInvalidOptions)
	}
	b := &Backend{
		client:    client,
		batch:     coalescer{client: client, replicas: o.MinReplicas, replicaTimeout: o.ReplicaTimeout},
		prefix:    o.KeyPrefix,
		channel:   o.KeyPrefix + "released",
		log:       o.Logger,
		onWarning: o.OnWarning,
	}
	b.notify = newNotifier(client, b.channel, backendkit.NewSessionID(), b.log, b.passRelease, b.leaveQueue)
	password, ctxTimeouts, known := clientOptions(client)
	if !o.KeepDriverLogger {
		b.driverLog = &driverLogSink{log: o.Logger, secrets: append(secrets, password)}
		driverLogs.add(b.driverLog)
	}
	if known && !ctxTimeouts {
		b.warn(Warning{Code: WarnContextTimeouts, Message: "the redis client was built without ContextTimeoutEnabled: " +
			"calls against an unresponsive server last until its read timeout instead of the engine's deadline"})
	}
	return b, nil
}

// Open connects to the Redis server of rawURL and returns a Backend that
// owns the connection: Close closes it. URLs are those of go-redis's
// ParseURL: redis://[user:password@]host[:port][/db][?options] for plain
// TCP, rediss:// for TLS, unix:///path for a socket. opts.TLSConfig,
// opts.Username and opts.Password override what the URL says.
//
// A password holding '/', '?', '#' or '%' (a user name, also ':' or '@')
// must be percent-encoded in the URL, or given in opts: Open refuses a URL
// whose user information cannot be told from its host, path and query,
// rather than connect somewhere the URL did not mean.
//
// Before it returns, Open checks that the server answers and accepts the
// credentials: it dials, sends the connection's set-up commands (HELLO,
// AUTH, SELECT) and a PING, all bounded by ctx. An unreachable server
// fails with the dial error (once ctx ends, the last dial error is named
// in the message), a server that accepts the connection and never answers
// fails when ctx ends, with an error matching ctx.Err() (a PING cut by
// go-redis's shorter read timeout is sent again while ctx allows), and a
// refused password with an error matching ErrAuth. Without a deadline in ctx,
// go-redis's own timeouts bound the check: dial_timeout and read_timeout
// in the URL's query, 5s each by default. Errors never contain the
// password, nor the value of a query parameter that names a credential
// (backendkit.IsCredentialParam: password=, sentinel_password=,
// auth_token=, ...: go-redis refuses them for a redis:// URL), nor any
// part of a URL that could not be parsed, in any error of their chain and
// in any fmt verb: they describe the URL with those values masked and every
// other byte as written, and mask them in go-redis's messages too when
// they have 6 bytes or more and are not numbers (backendkit.Maskable).
// Errors about the URL itself match ErrInvalidOptions and
// simba.ErrInvalidURL, and are returned before any dial: an empty or blank
// URL, a scheme of no form below, a missing host, a port that is not a
// number from 1 to 65535 (the port "1:99" of redis://h:1:99), each named as
// such.
//
// Two more forms reach replicated servers:
//
//	redis+sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[/db][?options]
//	redis+cluster://[user:password@]host[:port][,host[:port]...][?options]
//
// with rediss+sentinel and rediss+cluster for TLS (each server's
// certificate checked against the host it is dialled at). The hosts are
// the sentinels (port 26379 by default) or the cluster's seed nodes (6379
// by default); the user information authenticates the Redis servers that
// hold the data, and the sentinels' own credentials are the parameters
// sentinel_username and sentinel_password. The other parameters are those
// of go-redis's ParseFailoverURL and ParseClusterURL, without the ones the
// URL's parts give (addr, master_name, db, username, password). A Cluster
// Backend's key prefix defaults to DefaultClusterKeyPrefix ("{simba}:");
// one without a hash tag is refused, as by New.
//
// Every form takes Simba's own parameters min_replicas and
// replica_timeout (Options.MinReplicas and ReplicaTimeout, which win when
// set), removed before go-redis reads the query; any parameter neither
// knows is refused, as is a query that cannot be decoded (a bad percent
// escape, pairs separated by ';').
//
// Importing this package registers Open, with zero Options, for the
// schemes redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster
// and rediss+cluster with simba.OpenBackend.
func Open(ctx context.Context, rawURL string, opts Options) (*Backend, error) {
	if _, err := opts.withDefaults(); err != nil {
		return nil, err
	}
	t, err := parseURL(rawURL)
	secrets := append(t.secrets, opts.Password, opts.SentinelPassword)
	if err != nil {
		return nil, backendkit.MaskError(err, secrets)
	}
	if opts.MinReplicas == 0 && opts.ReplicaTimeout == 0 {
		opts.MinReplicas, opts.ReplicaTimeout = t.own.MinReplicas, t.own.ReplicaTimeout
		if _, err := opts.withDefaults(); err != nil {
			return nil, invalidURL(fmt.Errorf("%w (from the redis URL %s)", err, t.where))
		}
	}
	if opts.KeyPrefix == "" && t.cluster != nil {
		opts.KeyPrefix = DefaultClusterKeyPrefix
	}
	if (opts.SentinelUsername != "" || opts.SentinelPassword != "") && t.failover == nil {
		return nil, backendkit.MaskError(fmt.Errorf("%w: Options.SentinelUsername or SentinelPassword with the URL %s, which names no sentinels",
			ErrInvalidOptions, t.where), secrets)
	}
	client := t.newClient(opts)
	// Made before the PING: its log sink masks the failed dials that
	// go-redis logs while the PING retries.
	b, err := newBackend(client, opts, secrets)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	b.ownsClient = true
	dials := &dialRecorder{}
	client.AddHook(dials)
	if err := ping(ctx, client); err != nil {
		_ = b.Close()
		if last := dials.lastErr(); last != nil && ctx.Err() != nil {
			// The driver retried until ctx ended; say why it could not
			// connect rather than only that time ran out. The dial error
			// is text only: a dial timeout of its own would otherwise make
			// errors.Is report DeadlineExceeded for a cancelled ctx.
			err = fmt.Errorf("%w (last dial attempt: %v)", err, last) //nolint:errorlint // the cause is ctx's end; the dial error is detail
		}
		return nil, backendkit.MaskError(wrapErr("connect to "+t.where, err), secrets)
	}
	return b, nil
}

// ping checks that the server answers, within ctx. go-redis bounds each
// read by its read timeout (read_timeout, 3s by default) as well as by
// ctx, so a server that accepts the connection and never answers fails a
// PING before a longer deadline of ctx: then the PING is sent again, over
// a new connection, until ctx ends, and the error says that the server
// did not answer. Without a deadline in ctx, the first timeout is the
// answer.
func ping(ctx context.Context, client redis.UniversalClient) error {
	var silent error
	for {
		start := time.Now()
		err := client.Ping(ctx).Err()
		_, bounded := ctx.Deadline()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil && silent != nil:
			return fmt.Errorf("%w (%s: %v)", err, silence(silent), silent) //nolint:errorlint // the cause is ctx's end
		case ctx.Err() != nil || !bounded || !isTimeout(err):
			return err
		}
		silent = err
		if time.Since(start) < pingRetryPause {
			// Not a read that waited: pause rather than spin.
			select {
			case <-ctx.Done():
			case <-time.After(pingRetryPause):
			}
		}
	}
}

// silence says what the timeout err of a PING was: a dial that got no
// connection (an unreachable or black-holed host), or a server that took
// the connection and never answered.
func silence(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return "no connection was made within the dial timeout, tried until the context ended"
	}
	return "the server accepted connections but never answered"
}

// pingRetryPause is the least time between two PINGs of Open.
const pingRetryPause = 50 * time.Millisecond

// dialRecorder is a go-redis hook that remembers the last failed dial.
type dialRecorder struct{ last atomic.Pointer[error] }

func (d *dialRecorder) lastErr() error {
	if last := d.last.Load(); last != nil {
		return *last
	}
	return nil
}

func (d *dialRecorder) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			d.last.Store(&err)
		}
		return conn, err
	}
}

func (d *dialRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d *dialRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// isNil reports whether client is nil, also as a typed nil pointer.
func isNil(client redis.UniversalClient) bool {
	v := reflect.ValueOf(client)
	return client == nil || v.Kind() == reflect.Pointer && v.IsNil()
}

// clientOptions reads what New needs of a go-redis client, when its type
// tells (known): the password it authenticates with, and whether it
// honours context deadlines (ContextTimeoutEnabled).
func clientOptions(client redis.UniversalClient) (password string, ctxTimeouts, known bool) {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().Password, c.Options().ContextTimeoutEnabled, true
	case *redis.ClusterClient:
		return c.Options().Password, c.Options().ContextTimeoutEnabled, true
	case *redis.Ring:
		return c.Options().Password, c.Options().ContextTimeoutEnabled, true
	}
	return "", false, false
}

// Close stops the release subscription, wakes every release watcher,
// takes the Backend out of the waiter queues of the leases it watched
// (so that their next release wakes a live waiter) and, when the Backend
// was made by Open, closes its client. Taking it out of the queues is one
// request, sent only when the Backend watched a lease and waited for at
// most 250ms (when the client honours context deadlines, see New); Close
// waits for no other answer from the server, so it returns that soon even
// when the server hangs, and calls in flight on the client it closes fail.
// On a client Close does not own, the Backend's last best-effort requests
// (a release handed on, a queue left) may still be in flight: they end
// within a second. Sessions are left to expire on the server (close them
// first with CloseSession to free their leases at once). Close is
// idempotent; every other method returns ErrClosed afterwards.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	b.notify.close()
	driverLogs.remove(b.driverLog)
	if b.ownsClient {
		err := b.client.Close()
		b.notify.wait() // they fail at once on the closed client
		return wrapErr("close", err)
	}
	return nil
}

// KeyPrefix returns the prefix of every key and channel this Backend uses.
func (b *Backend) KeyPrefix() string { return b.prefix }

// OpenSession creates a session with a random 128-bit id that expires lease
// (rounded down to whole milliseconds, at least 1ms) after this call unless
// kept alive. The first call of a Backend also reads the server's
// maxmemory-policy and, unless Options.MinReplicas is set, whether it has
// replicas, once (see WarnEvictionPolicy and WarnReplicasWithoutWait), in
// one more round trip. Every grant carries the set-up warnings recorded
// so far (see Warning), which the engine logs and publishes once per
// session.
func (b *Backend) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	return b.openSession(ctx, lease, "")
}

// OpenSessionAs is OpenSession for a session whose hash also stores
// identity, which Holder reports. The identity must be at most
// simba.MaxIdentity bytes of printable UTF-8; anything else fails with an
// error matching simba.ErrInvalidArgument, before any call. An empty
// identity stores none, as OpenSession does.
func (b *Backend) OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error) {
	return b.openSession(ctx, lease, identity)
}

func (b *Backend) openSession(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error) {
	if b.closed.Load() {
		return simba.SessionGrant{}, ErrClosed
	}
	ms, err := leaseMillis(lease)
	if err != nil {
		return simba.SessionGrant{}, err
	}
	args := []any{ms}
	if identity != "" {
		if err := backendkit.CheckIdentity(identity); err != nil {
			return simba.SessionGrant{}, fmt.Errorf("simbaredis: open session: %w: identity: %w", simba.ErrInvalidArgument, err)
		}
		args = append(args, "identity", identity)
	}
	b.checkServer(ctx)
	sid := backendkit.NewSessionID()
	n, err := openScript.Run(ctx, b.client, []string{b.sessionKey(sid)}, args...).Int64()
	if err != nil {
		return simba.SessionGrant{}, wrapErr("open session", err)
	}
	if n <= 0 {
		return simba.SessionGrant{}, fmt.Errorf("simbaredis: open session: server reported %dms remaining", n)
	}
	return simba.SessionGrant{ID: simba.SessionID(sid), Remaining: time.Duration(n) * time.Millisecond, Warnings: b.setupWarnings()}, nil
}

// KeepAlive renews s for req.Lease from now (server time) and reports,
// from the same atomic step, the remaining validity, which of the leases
// it checks s no longer owns at the token req.Held gives (Lost), which of
// req.Unsure s owns and at which token (Owned), and the live member count
// of every group s joined. It returns an error matching
// simba.ErrSessionExpired when s has expired, was closed or is not an id
// this package issued.
//
// The cost does not grow with the number of leases s holds: one script
// reads the hash of every unsure lease and of every held one up to
// simba.MinLeaseChecks, or of simba.MinLeaseChecks of them in turn when
// more are held, so that each is checked within
// len(req.Held)/simba.MinLeaseChecks keep-alives (ADR 0007). A held
// lease whose hash no longer names s with that token, because another
// program changed or deleted it, is reported lost. A lease or group key
// that another program overwrote with another type is left out and
// recorded as a WarnWrongTypeKey warning, so that one damaged key does not
// end the whole session.
func (b *Backend) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	if known, err := b.check(s); !known {
		return simba.KeepAliveReply{}, orExpired(err, "keep-alive", s)
	}
	ms, err := leaseMillis(req.Lease)
	if err != nil {
		return simba.KeepAliveReply{}, err
	}
	sid := string(s)
	held := b.checks.pick(sid, req)
	keys := append(make([]string, 0, 2+len(held)+len(req.Unsure)), b.sessionKey(sid), b.joinedKey(sid))
	args := append(make([]any, 0, 4+len(held)), ms, b.prefix, sid, len(held))
	for _, name := range held {
		keys = append(keys, b.leaseKey(name))
		args = append(args, strconv.FormatUint(req.Held[name], 10))
	}
	for _, name := range req.Unsure {
		keys = append(keys, b.leaseKey(name))
	}
	res, acked, err := b.batch.waited(ctx, keepAliveScript, keys, args...)
	if err != nil {
		return simba.KeepAliveReply{}, wrapErr("keep-alive", err)
	}
	reply, bad, err := parseKeepAlive(res, held, req.Unsure)
	if err != nil {
		return simba.KeepAliveReply{}, fmt.Errorf("simbaredis: keep-alive: %w", err)
	}
	if reply.Remaining < 0 {
		b.checks.forget(sid)
		return simba.KeepAliveReply{}, expired("keep-alive", s)
	}
	for _, key := range bad {
		b.warn(Warning{Code: WarnWrongTypeKey, Message: "key " + key + " does not hold the type Simba writes there; it is ignored"})
	}
	if err := b.batch.replicated("keep-alive", acked); err != nil {
		// Renewed on the primary only: a failover may lose it, so the
		// engine must not count on it.
		return simba.KeepAliveReply{}, err
	}
	return reply, nil
}

// Acquire makes s the owner of name when the lease is free, owned by an
// expired session or already owned by s, and returns the new term's token:
// the greater of the lease's token + 1 (for a name without a lease hash,
// the floor + 1; see Sweep) and the server's TIME in microseconds, so tokens
// of a name strictly increase, and stay above the earlier ones even when
// the lease hash was lost, as long as the clock of the server that grants
// the next term is not behind by more than the time since the last grant
// (ADR 0020). The lease hash also records the server time the term began,
// which Holder reports. It returns Won == false when another live session
// owns the lease, an error matching simba.ErrSessionExpired when s is gone,
// a *simba.NameError for an invalid name, and one matching ErrWrongType
// when the lease key holds something else than a hash.
func (b *Backend) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	return b.acquire(ctx, s, name, nil)
}

// AcquirePermit is Acquire of the lease of slot p.Slot of semaphore
// p.Semaphore (simba.PermitName), in the same one script, which also
// keeps the semaphore's record P permits:<semaphore>: the number of
// permits its slots were last taken under and their highest token. The
// new token is above the record's too, so the tokens of a semaphore
// strictly increase across its slots, also after Sweep removed the
// slots' hashes (the record is never removed). While a live session
// holds a slot below the recorded number and that number is not
// p.Permits, the call changes nothing and fails with an error matching
// simba.ErrPermitsMismatch that names both numbers. A Permit that
// simba.ValidatePermit refuses fails before any call.
func (b *Backend) AcquirePermit(ctx context.Context, s simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	if err := simba.ValidatePermit(p); err != nil {
		return simba.AcquireResult{}, fmt.Errorf("simbaredis: acquire permit: %w", err)
	}
	return b.acquire(ctx, s, simba.PermitName(p.Semaphore, p.Slot), &p)
}

// acquire is Acquire of name, or with p the AcquirePermit of p, whose
// slot name is.
func (b *Backend) acquire(ctx context.Context, s simba.SessionID, name string, p *simba.Permit) (simba.AcquireResult, error) {
	if known, err := b.check(s, name); !known {
		return simba.AcquireResult{}, orExpired(err, "acquire", s)
	}
	sid, op := string(s), fmt.Sprintf("acquire %q", name)
	keys, args := []string{b.leaseKey(name), b.sessionKey(sid)}, []any{sid, b.prefix, name}
	script, typed := acquireScript, []typedKey{{keys[0], "hash"}, {keys[1], "hash"}, {b.prefix + "floor", "string"}}
	if p != nil {
		keys, args = append(keys, b.prefix+"permits:"+p.Semaphore), append(args, p.Semaphore, p.Permits)
		script, typed = permitScript, append(typed, typedKey{keys[2], "hash"})
	}
	res, acked, err := b.batch.run(ctx, true, script, keys, args...)
	if err != nil {
		return simba.AcquireResult{}, b.wrapScriptErr(ctx, op, err, typed...)
	}
	switch res := res.(type) {
	case int64:
		switch {
		case res < 0:
			return simba.AcquireResult{}, expired("acquire", s)
		case res > 0 && p != nil:
			return simba.AcquireResult{}, fmt.Errorf("simbaredis: %s: semaphore %q holds permits taken under %d, asked with %d: %w", op, p.Semaphore, res, p.Permits, simba.ErrPermitsMismatch)
		}
		return simba.AcquireResult{}, nil
	case string:
		tok, err := strconv.ParseUint(res, 10, 64)
		if err != nil || tok == 0 {
			return simba.AcquireResult{}, fmt.Errorf("simbaredis: %s: %w: token %q", op, errReply, res)
		}
		if err := b.batch.replicated(op, acked); err != nil {
			b.giveBack(ctx, s, name, tok)
			return simba.AcquireResult{}, err
		}
		return simba.AcquireResult{Won: true, Token: tok}, nil
	}
	return simba.AcquireResult{}, fmt.Errorf("simbaredis: %s: %w: %T", op, errReply, res)
}

// giveBack releases a term Acquire won but cannot report, because too
// few replicas acknowledged it. A release that fails leaves the lease to
// the engine: the failed Acquire makes the name unsure, the session's next
// keep-alive reports it owned, and the engine releases it as a lease it
// does not hold.
func (b *Backend) giveBack(ctx context.Context, s simba.SessionID, name string, token uint64) {
	if err := b.Release(ctx, s, name, token); err != nil {
		b.log.Debug("simbaredis: giving back a term too few replicas acknowledged failed", "name", name, "token", token, "error", err)
	}
}

// Release frees name if s owns it with exactly token and publishes the
// release, so that watchers on every Backend sharing the server wake at
// once. It is a no-op otherwise, so a late release never frees a later
// term.
func (b *Backend) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	if known, err := b.check(s, name); !known {
		return err
	}
	sid := string(s)
	keys := []string{b.leaseKey(name), b.sessionKey(sid), b.waitersKey(name)}
	tok := strconv.FormatUint(token, 10)
	if _, _, err := b.batch.run(ctx, false /* no WAIT: ADR 0021 */, releaseScript, keys, sid, tok, b.channel, name); err != nil {
		return b.wrapScriptErr(ctx, fmt.Sprintf("release %q", name), err, typedKey{keys[0], "hash"})
	}
	return nil
}

// JoinGroup makes s a member of group until it leaves or the session ends
// and returns the live member count. Membership is a sorted set scored by
// each member's session expiry, so members whose session expired stop
// counting without anyone cleaning up.
func (b *Backend) JoinGroup(ctx context.Context, s simba.SessionID, group string) (int, error) {
	if known, err := b.check(s, group); !known {
		return 0, orExpired(err, "join group", s)
	}
	sid := string(s)
	keys := []string{b.sessionKey(sid), b.joinedKey(sid), b.groupKey(group)}
	n, err := joinScript.Run(ctx, b.client, keys, sid, group).Int64()
	switch {
	case err != nil:
		return 0, wrapErr(fmt.Sprintf("join group %q", group), err)
	case n < 0:
		return 0, expired("join group", s)
	}
	return int(n), nil
}

// LeaveGroup ends the membership of s in group; it is a no-op when s is not
// a member.
func (b *Backend) LeaveGroup(ctx context.Context, s simba.SessionID, group string) error {
	if known, err := b.check(s, group); !known {
		return err
	}
	sid := string(s)
	keys := []string{b.joinedKey(sid), b.groupKey(group)}
	err := leaveScript.Run(ctx, b.client, keys, sid, group).Err()
	return wrapErr(fmt.Sprintf("leave group %q", group), err)
}

// CloseSession ends s at once: every lease it owns is freed, every
// membership ends, and its keys are deleted, in one atomic step; a release
// is published for each lease that nodes wait for. Closing an expired or
// unknown session is a no-op. A session that owns more than closeBatch
// leases takes more round trips: the first script frees them all (by
// deleting the session) and clears the owner of the first closeBatch, and
// the others are cleared in batches of closeBatch afterwards, so that Redis
// is never blocked for long. Those later batches only tidy up (their
// leases are free already): if ctx ends during them, CloseSession still
// returns nil, and the leases left tidy themselves at their next acquire.
func (b *Backend) CloseSession(ctx context.Context, s simba.SessionID) error {
	if known, err := b.check(s); !known {
		return err
	}
	sid := string(s)
	keys := []string{b.sessionKey(sid), b.joinedKey(sid)}
	b.checks.forget(sid)
	rest, err := closeScript.Run(ctx, b.client, keys, sid, b.prefix, b.channel, closeBatch).StringSlice()
	if err != nil {
		return wrapErr("close session", err)
	}
	for len(rest) > 0 {
		n := min(len(rest), closeBatch)
		leases := make([]string, 0, n)
		args := append(make([]any, 0, n+2), sid, b.channel)
		for _, name := range rest[:n] {
			leases = append(leases, b.leaseKey(name))
			args = append(args, name)
		}
		rest = rest[n:]
		if err := freeScript.Run(ctx, b.client, leases, args...).Err(); err != nil {
			if ctx.Err() != nil {
				b.log.Debug("simbaredis: close session: leases left to tidy", "session", sid, "left", len(rest)+n, "error", err)
				return nil
			}
			return wrapErr("close session", err)
		}
	}
	return nil
}

// closeBatch is the number of leases one close script clears.
const closeBatch = 500

// Holder reports the live session that owns name: its id, the identity it
// was opened with (empty for OpenSession), the token of its term and when
// the term began, by the server's clock in whole milliseconds (zero for a
// term begun by a version of this package that did not record it). ok is
// false when the lease was never taken or was released, and when the
// session its hash names no longer exists (expired or closed), exactly
// when Acquire by another session would win. One script reads both hashes
// atomically and writes nothing: one round trip. Holder fails with the
// *simba.NameError of an invalid name before any call, and with an error
// matching ErrWrongType when the lease or the owner's session key holds
// something else than a hash.
func (b *Backend) Holder(ctx context.Context, name string) (h simba.Holder, ok bool, err error) {
	if b.closed.Load() {
		return simba.Holder{}, false, ErrClosed
	}
	if err := simba.ValidateName(name); err != nil {
		return simba.Holder{}, false, err
	}
	res, err := holderScript.Run(ctx, b.client, []string{b.leaseKey(name)}, b.prefix).Result()
	if err != nil {
		return simba.Holder{}, false, wrapErr(fmt.Sprintf("holder of %q", name), err)
	}
	h, ok, err = parseHolder(res)
	if err != nil {
		return simba.Holder{}, false, fmt.Errorf("simbaredis: holder of %q: %w", name, err)
	}
	return h, ok, nil
}

// WatchRelease returns a channel that is closed once name may have become
// free. The first call starts the Backend's one shared subscription; every
// call waits until that subscription is live (the server confirmed it),
// then, in one round trip, either finds the lease free and closes the
// channel at once, or puts this Backend in the lease's queue of waiting
// nodes (where it keeps its place if it was there already). A release
// announces itself to the first node of the queue only, which leaves the
// queue: waiters further back are not woken for a lease that the first
// one takes (no thundering herd), and hear a later release. A node told of
// a release it no longer waits for hands it on to the next in line. A
// session that closes wakes every watcher of its leases, as does a new
// subscription after a broken one (releases may have been missed
// meanwhile) and Close. WatchRelease fails with ctx's error when ctx ends
// before the subscription is live, with the server's error when the
// request fails, and with ErrClosed after Close. When ctx is done the
// watch is dropped (the last watch of a name also takes the Backend out of
// its queue; a new watch of the name waits for that request, so that it
// cannot undo the new watch's place) and the channel may never be closed.
func (b *Backend) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	if err := simba.ValidateName(name); err != nil {
		return nil, err
	}
	ch, err := b.notify.watch(ctx, name)
	if err != nil {
		return nil, err
	}
	keys := []string{b.leaseKey(name), b.waitersKey(name)}
	held, err := watchScript.Run(ctx, b.client, keys, b.prefix, b.notify.id, name).Int64()
	if b.closed.Load() {
		// Close ran meanwhile: its removal from the queues may have come
		// before this queueing, which would leave the closed Backend first
		// in line for the next release.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
		b.leaveQueue(lctx, name)
		cancel()
		return nil, ErrClosed
	}
	if err != nil {
		return nil, wrapErr(fmt.Sprintf("watch %q", name), err)
	}
	if held == 0 {
		b.notify.released(name) // free already: wake this watch (and any other of name)
	}
	return ch, nil
}

func (b *Backend) sessionKey(sid string) string  { return b.prefix + "session:" + sid }
func (b *Backend) joinedKey(sid string) string   { return b.prefix + "joined:" + sid }
func (b *Backend) leaseKey(name string) string   { return b.prefix + "lease:" + name }
func (b *Backend) groupKey(group string) string  { return b.prefix + "group:" + group }
func (b *Backend) waitersKey(name string) string { return b.prefix + "waiters:" + name }

// keyNode returns the client to ask about the keys of the prefix as a
// whole (SCAN, CONFIG, INFO): b.client, or on a Cluster the primary of the
// prefix's hash slot, which holds every key of the Backend.
func (b *Backend) keyNode(ctx context.Context) (redis.UniversalClient, error) {
	if cc, ok := b.client.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, b.prefix+"floor")
		return node, err
	}
	return b.client, nil
}

// passRelease hands a release of name announced to this Backend, which no
// longer waits for it, on to the next node in the lease's queue.
func (b *Backend) passRelease(ctx context.Context, name string) {
	keys := []string{b.leaseKey(name), b.waitersKey(name)}
	if err := passScript.Run(ctx, b.client, keys, b.prefix, b.channel, name).Err(); err != nil {
		b.log.Debug("simbaredis: passing a release on to the next waiter failed", "name", name, "error", err)
	}
}

// leaveQueue takes this Backend out of the queues of names, in one round
// trip, once none of its watches waits for them any more or it closes.
func (b *Backend) leaveQueue(ctx context.Context, names ...string) {
	_, err := b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, name := range names {
			p.ZRem(ctx, b.waitersKey(name), b.notify.id)
		}
		return nil
	})
	if err != nil {
		b.log.Debug("simbaredis: leaving the waiter queue failed", "names", names, "error", err)
	}
}

// check starts every operation on a session: it fails with ErrClosed
// after Close and with the *simba.NameError of an invalid name, and
// reports known == false (with a nil error) when s cannot be an id this
// package issued, so no such session exists. known is false whenever err
// is not nil.
func (b *Backend) check(s simba.SessionID, names ...string) (known bool, err error) {
	if b.closed.Load() {
		return false, ErrClosed
	}
	for _, name := range names {
		if err := simba.ValidateName(name); err != nil {
			return false, err
		}
	}
	return backendkit.ValidSessionID(string(s)), nil
}

// orExpired returns err, or when it is nil the error of op on a session
// that does not exist.
func orExpired(err error, op string, s simba.SessionID) error {
	if err != nil {
		return err
	}
	return expired(op, s)
}

func expired(op string, s simba.SessionID) error {
	return fmt.Errorf("simbaredis: %s: session %q: %w", op, string(s), simba.ErrSessionExpired)
}

// leaseMillis converts a session lease to the whole milliseconds Redis
// expires keys with.
func leaseMillis(lease time.Duration) (int64, error) {
	ms := lease.Milliseconds()
	if ms < 1 {
		return 0, fmt.Errorf("simbaredis: session lease %v: must be at least 1ms", lease)
	}
	return ms, nil
}
