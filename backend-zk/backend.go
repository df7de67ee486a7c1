package simbazk

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// ErrClosed is returned by every method of a [Backend] after Close.
var ErrClosed = errors.New("simbazk: backend closed")

// Backend is a [simba.Backend], [simba.ReleaseNotifier],
// [simba.HolderReader] and [simba.IdentityOpener] on a Zookeeper ensemble.
// Each session it opens is a Zookeeper session on a connection of its own;
// a further connection, dialed on first use, carries the release watches
// and the reads of [Backend.Holder]. All methods are safe for concurrent use and return soon
// after their context is done (the request already sent still completes
// in the background).
type Backend struct {
	servers   []string
	opts      Options
	log       *slog.Logger
	leasesDir string // Root/leases

	mu       sync.Mutex
	closed   bool
	closing  chan struct{} // closed by Close
	sessions map[simba.SessionID]*session
	conns    map[*session]struct{} // every session whose connection still runs
	watcher  *watchConn            // nil until the first WatchRelease or Holder
	watches  map[string]*releaseWatch
	// The queue nodes of the backend (see watchQueued): their prefix, of
	// 128 random bits like a session id's, the node each queue dir holds
	// for a watch of the backend that waits, and the dirs that may hold
	// one no watch uses, each swept by a goroutine.
	queuePrefix string
	queued      map[string]string
	sweeps      map[string]struct{}
	wg          sync.WaitGroup // every goroutine the backend started

	// pause, when set (by tests only, before the first call), runs between
	// the exists request of a release or re-acquire and the request that
	// acts on its answer, with the name's lock held; op names the call
	// ("release name", "acquire name"). It also runs between the start
	// of a session's connection and its record ("open session").
	pause func(op string)
}

var (
	_ simba.ReleaseNotifier = (*Backend)(nil)
	_ simba.OpenedBackend   = (*Backend)(nil)
	_ simba.HolderReader    = (*Backend)(nil)
	_ simba.HolderLister    = (*Backend)(nil)
	_ simba.IdentityOpener  = (*Backend)(nil)
	_ simba.PermitAcquirer  = (*Backend)(nil)
)

// New returns a backend on the Zookeeper servers given as "host:port".
// It validates opts and dials nothing: each session dials its own
// connection. The backend owns every connection it opens; Close closes
// them all.
func New(servers []string, opts Options) (*Backend, error) {
	if len(servers) == 0 {
		return nil, &OptionsError{Field: "servers", Reason: "empty list"}
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return &Backend{
		servers:     append([]string(nil), servers...),
		opts:        o,
		log:         o.Logger.With("component", "simbazk"),
		leasesDir:   o.Root + "/leases",
		closing:     make(chan struct{}),
		sessions:    make(map[simba.SessionID]*session),
		conns:       make(map[*session]struct{}),
		watches:     make(map[string]*releaseWatch),
		queued:      make(map[string]string),
		sweeps:      make(map[string]struct{}),
		queuePrefix: "w-" + backendkit.NewSessionID() + "-",
	}, nil
}

// Open is [New] with a Zookeeper connect string,
// "host:port,host:port[/chroot]", that checks before it returns that a
// server answers. A chroot is placed before opts.Root (or its default),
// which must be a valid Root on its own: "zk1:2181/app" keeps the leases
// under /app/simba/leases.
//
// The check is a probe of the servers in the order given, until one
// answers: a connection made as every connection of the backend is (Dialer,
// TLS), then a Zookeeper connect request, whose session Open closes at
// once. No session stays open (should the server stop answering between
// the two requests, the probe's session expires after the server's minimum
// session timeout, owning no node). Each server gets DialTimeout, within
// ctx, to connect and answer: Open returns within ctx, and without a
// deadline in ctx within DialTimeout per server. With a deadline, the
// servers are asked again after a round in which one did not answer
// within DialTimeout, until ctx ends: Open waits for its context on a
// server that accepts connections and never answers.
//
// With opts.Auth, Open then checks the identity, within ctx: a Zookeeper
// server accepts any digest identity, so a wrong password shows only in
// the ACLs. Open opens a session (closed at once), reads the ACL of Root,
// or of its nearest ancestor that exists (where Simba creates its nodes),
// and fails with an error matching ErrAuth when that ACL lets neither the
// identity nor world:anyone create nodes and names the same user with
// another password. An ACL it cannot judge from the client (entries of
// another scheme or user, a super user) passes; a refusal then shows as a
// missing permission on the first write.
//
// Open fails with an *OptionsError for a bad connect string or options
// (errors.Is(err, ErrInvalidOptions)); when no server answers, with an
// error that names each server's failure, and wraps ctx.Err() when ctx
// ended first. Importing this package registers the scheme zk with
// simba.OpenBackend (see [ParseURL]).
func Open(ctx context.Context, connect string, opts Options) (*Backend, error) {
	servers, chroot, err := ParseConnectString(connect)
	if err != nil {
		return nil, err
	}
	if chroot != "" {
		// Root is checked on its own first: "simba" after the chroot
		// /app would otherwise pass as the node /appsimba.
		if opts.Root != "" {
			if problem := rootProblem(opts.Root); problem != "" {
				return nil, &OptionsError{Field: "Root", Reason: problem}
			}
		}
		opts.Root = chroot + cmp.Or(opts.Root, DefaultRoot)
	}
	b, err := New(servers, opts)
	if err != nil {
		return nil, err
	}
	err = b.probeAny(ctx)
	if err == nil && b.opts.Auth != "" {
		err = b.checkAuth(ctx)
	}
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// Root returns the path under which the backend keeps its nodes.
func (b *Backend) Root() string { return b.opts.Root }

// Close closes every connection the backend opened, which ends every
// session at once on the server (their leases are freed and their group
// memberships end), and waits for the backend's goroutines. It gives each
// server up to a second to confirm the end of its sessions, then closes
// the network connections whatever the server does (each connection
// first lets its requests in flight end, for half a second at most, see
// session.shut and watchConn.close), so it returns within a few seconds
// even when a server hangs (sessions whose close was not confirmed expire
// after their timeout). Calls in flight fail; later calls return
// ErrClosed. Close is idempotent and always returns nil.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.closing)
	all := slices.Collect(maps.Keys(b.conns))
	w := b.watcher
	b.mu.Unlock()

	for _, s := range all {
		b.wg.Go(s.closeConn)
	}
	if w != nil {
		b.wg.Go(w.close)
	}
	b.wg.Wait()
	return nil
}

// spawn runs f on a goroutine that Close waits for. It reports false,
// without running f, once the backend is closed.
func (b *Backend) spawn(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Go(f)
	return true
}

// call runs f on its own goroutine and returns its result, or the context's
// error as soon as ctx is done. The Zookeeper client has no cancellation:
// an abandoned f finishes in the background (a request is answered or
// failed within the response timeout, at once when the connection closes).
func call[T any](ctx context.Context, b *Backend, op string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("simbazk: %s: %w", op, err)
	}
	ch := make(chan result, 1)
	if !b.spawn(func() {
		v, err := f()
		ch <- result{v, err}
	}) {
		return zero, ErrClosed
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-ch:
			return r.v, r.err
		default:
		}
		return zero, fmt.Errorf("simbazk: %s: %w", op, ctx.Err())
	}
}

// session returns the live session id names, or simba.ErrSessionExpired
// when it is unknown, closed or expired.
func (b *Backend) session(id simba.SessionID) (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	s, ok := b.sessions[id]
	if !ok || s.expired.Load() {
		return nil, fmt.Errorf("simbazk: session %s: %w", id, simba.ErrSessionExpired)
	}
	return s, nil
}

// onSession runs f through call on the live session id, once name, the
// lease or group name op acts on, is valid: a *simba.NameError otherwise.
func onSession[T any](ctx context.Context, b *Backend, id simba.SessionID, op, name string, f func(s *session) (T, error)) (T, error) {
	var zero T
	if err := simba.ValidateName(name); err != nil {
		return zero, err
	}
	s, err := b.session(id)
	if err != nil {
		return zero, err
	}
	return call(ctx, b, op+" "+name, func() (T, error) { return f(s) })
}

// between runs the test hook pause, if any.
func (b *Backend) between(op string) {
	if b.pause != nil {
		b.pause(op)
	}
}

// leasePath is the node of lease name (a valid Simba name).
func (b *Backend) leasePath(name string) string { return b.leasesDir + "/" + name }

// groupPath is the node under which the members of group live.
func (b *Backend) groupPath(group string) string { return b.opts.Root + "/groups/" + group }

// ensureParents creates every missing ancestor of path (persistent nodes
// with the configured ACL).
func (b *Backend) ensureParents(conn *zk.Conn, path string) error {
	for i := 1; i < len(path); i++ {
		if path[i] != '/' {
			continue
		}
		if _, err := conn.Create(path[:i], nil, 0, b.opts.ACL); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("simbazk: create %s: %w", path[:i], err)
		}
	}
	return nil
}

// zkLogger routes the Zookeeper client's messages to slog at debug level.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	if z.l.Enabled(context.Background(), slog.LevelDebug) {
		z.l.Debug("zookeeper client: " + fmt.Sprintf(format, args...))
	}
}

// clampTimeout turns a lease into a session timeout the protocol can carry.
func clampTimeout(d time.Duration) time.Duration {
	const most = time.Duration(1<<31-1) * time.Millisecond
	return min(max(d, time.Millisecond), most)
}
