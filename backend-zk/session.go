package simbazk

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// errNoRevival is what the dialer of an expired session answers: its
// connection must never open a replacement session.
var errNoRevival = errors.New("simbazk: session expired, not reconnecting")

// session is one Simba session: a Zookeeper session on its own connection.
type session struct {
	b        *Backend
	conn     *zk.Conn      // set once zk.Connect returned, then connSet is closed
	connSet  chan struct{} // closeConn waits for it: an expiry can come first
	identity []byte        // as given to OpenSessionAs: the data of its lease nodes

	zid      atomic.Int64 // Zookeeper session id; 0 until connected
	timeout  atomic.Int64 // negotiated session timeout, in ns; the one asked for until then
	ready    chan struct{}
	expired  atomic.Bool
	dead     chan struct{} // closed when expired
	done     chan struct{} // closed when the connection's goroutines ended
	requests atomic.Int64  // requests sent, pings excluded (tests, benchmarks)
	renewed  atomic.Int64  // time.Now().UnixNano() of the open or the last KeepAlive call
	watching atomic.Bool   // an exists-watch was set (see setWatchesGate)

	reqs      inflight // every request on conn goes through do
	closeOnce sync.Once
	hosts     *hostList             // stopped by closeConn
	links     links                 // the network connection, closed by closeConn
	dialErr   atomic.Pointer[error] // the last failed dial, for a clear OpenSession error

	connMu sync.Mutex
	down   bool          // a connection broke and no new one answered yet
	next   chan struct{} // closed at the next connect response

	mu         sync.Mutex
	names      map[string]*nameLock // lease name -> its lock, while a call holds or waits for it
	groups     map[string]struct{}
	waiting    map[string]time.Time // lease name -> when an Acquire of it last lost to another session
	claims     map[string]*claim    // lease name -> a create sent on a release, for the next Acquire
	waitingMax int                  // size of waiting above which stale entries are dropped
	nodes      map[string]node      // lease name -> what the session knows of its node without asking (see node)
	fired      map[string]struct{}  // names whose entry in nodes changed since the last keep-alive began its reads
	reads      uint64               // keep-alives that began their reads (and reconnects): only the last one records
	settled    bool                 // every name of the Held of Generation settledGen is watched at its token
	settledGen uint64
}

// node is a lease node the session knows as its own, at czxid, because
// it created it or read it so under an exists-watch (watched), and no call
// of the session on the name began since: a release of that czxid is then
// one delete, and a keep-alive need not read a watched node whose watch
// did not fire. An event on the name's path, a release or an acquire of
// the name forgets it, a reconnect unwatches it. It is a cache: without
// it a release reads the node first, and a keep-alive reads it.
type node struct {
	czxid   int64
	watched bool
}

// note records what a call of the session, or an event, tells of the node
// of name: n, or nothing known when n is nil. Call with s.mu held.
func (s *session) note(name string, n *node) {
	if n != nil {
		s.nodes[name] = *n
	} else {
		delete(s.nodes, name)
	}
	s.fired[name] = struct{}{}
	s.settled = false
}

// id is the session's SessionID: its Zookeeper session id in hex.
func (s *session) id() simba.SessionID { return sessionID(s.zid.Load()) }

// sessionID is the SessionID of Zookeeper session zid: 16 hex digits, the
// id read as unsigned (an id whose server byte is 128 or more is negative
// as an int64). Holder names owners with it too.
func sessionID(zid int64) simba.SessionID {
	return simba.SessionID(fmt.Sprintf("%016x", uint64(zid)))
}

// responseTimeout is how long a request may wait for its answer before
// the connection is presumed dead: 2/3 of the session timeout, as the
// Zookeeper client itself uses.
func (s *session) responseTimeout() time.Duration {
	return time.Duration(s.timeout.Load()) * 2 / 3
}

// dial opens a connection of the session; once expired it refuses.
func (s *session) dial(network, address string, _ time.Duration) (net.Conn, error) {
	if s.expired.Load() {
		return nil, errNoRevival
	}
	c, err := s.b.dialLink(&s.links, s, &s.watching, network, address)
	if err != nil {
		s.dialErr.Store(&err)
	}
	return c, err
}

// connected is called with the connect response of each connection.
func (s *session) connected(id int64, timeout time.Duration) {
	switch {
	case id == 0:
		s.expire("the server reports it expired")
	case s.zid.CompareAndSwap(0, id):
		s.timeout.Store(int64(timeout))
		close(s.ready)
	case s.zid.Load() != id:
		s.expire("the server opened a different session")
	default:
		s.timeout.Store(int64(timeout))
		s.distrustWatches()
	}
	s.connMu.Lock()
	s.down = false
	close(s.next)
	s.next = make(chan struct{})
	s.connMu.Unlock()
}

// distrustWatches makes the next keep-alive read every held lease again,
// with a new exists-watch, after the session reconnected. The Zookeeper client
// sets its watches again on the new connection with the last zxid it saw,
// which it reads without synchronisation: when the answer to a request
// queued during the outage reached it first, the zxid is that later one,
// and the server fires no watch for a change made while the session was
// away (a node deleted and created again, say). Reading the leases once
// costs a request each.
func (s *session) distrustWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, n := range s.nodes {
		n.watched = false
		s.nodes[name] = n
	}
	s.reads++ // the reads in flight may have set their watch before the reconnect
	s.settled = false
}

// expire marks the session expired for good and closes its connection.
func (s *session) expire(reason string) {
	if s.expired.Swap(true) {
		return
	}
	close(s.dead)
	b := s.b
	b.log.Debug("session expired", "session", s.id(), "reason", reason)
	b.mu.Lock()
	if b.sessions[s.id()] == s {
		delete(b.sessions, s.id())
	}
	b.mu.Unlock()
	b.spawn(s.closeConn) // when closed, Close closes it
}

// closeConn closes the connection and waits for its goroutines, within
// about a second whatever the server does (see shut).
func (s *session) closeConn() {
	s.shut()
	<-s.done
}

// shut closes the connection, once. It first lets the requests in flight
// end and refuses new ones, for closeGrace at most, as watchConn.close
// does: a request queued while the library closes can be answered once
// more than its channel holds, which blocks the library's goroutines, and
// so closeConn, for good. The library then asks the server to end the
// session and waits up to a second for its answer; the network connection
// is closed then, so that a server that does not answer cannot hold the
// library's goroutines.
func (s *session) shut() {
	s.closeOnce.Do(func() {
		// The connect response of an expired session can arrive before
		// OpenSessionAs recorded the connection it belongs to.
		<-s.connSet
		s.hosts.stop()
		s.reqs.quiesce(closeGrace, closeGrace+time.Second, s.links.close)
		s.conn.Close()
		s.links.close()
	})
}

// do runs f, a request on the session's connection, unless the connection
// is closing (see inflight).
func (s *session) do(f func() error) error { return s.reqs.do(f) }

// failed maps an error of the Zookeeper client for op, marking the session
// expired when the server says so. After a lost connection it waits (at
// most until ctx is done) for the client's next connect: that is when an
// expiry shows, so a session that expired while the connection was down
// is reported expired rather than as a transient failure.
func (s *session) failed(ctx context.Context, op string, err error) error {
	if errors.Is(err, zk.ErrSessionExpired) {
		s.expire("a request was refused as expired")
	}
	if !s.expired.Load() && (errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer)) {
		s.connMu.Lock()
		down, next := s.down, s.next
		s.connMu.Unlock()
		if down {
			select {
			case <-next:
			case <-s.dead:
			case <-s.b.closing:
			case <-ctx.Done():
			}
		}
	}
	if s.expired.Load() {
		return fmt.Errorf("simbazk: %s: session %s: %w", op, s.id(), simba.ErrSessionExpired)
	}
	return fmt.Errorf("simbazk: %s: %w", op, err)
}

// lost is called when a connection of the session broke.
func (s *session) lost() {
	s.connMu.Lock()
	s.down = true
	s.connMu.Unlock()
}

// OpenSession dials a new Zookeeper session with lease as its session
// timeout and waits until the server accepted it. The grant's Remaining is
// the timeout the server negotiated, which is less than lease when the
// server caps it (maxSessionTimeout) and more when lease is below the
// server's minimum (2 ticks). A server that accepts the connection and
// does not answer is given one response timeout (2/3 of lease) before the
// next server is tried. When no server answers before ctx is done, the
// error wraps ctx.Err() and names the last connection failure.
func (b *Backend) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	return b.OpenSessionAs(ctx, lease, "")
}

// OpenSessionAs is [Backend.OpenSession] for a session that carries
// identity: every lease node the session creates holds the identity as its
// data (written by the set-data of the acquire's multi, so at no extra
// request), and [Backend.Holder] reports it. An empty identity is
// OpenSession. An identity of more than simba.MaxIdentity bytes, or not
// printable UTF-8, fails with an error matching simba.ErrInvalidArgument
// before anything is dialed.
func (b *Backend) OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error) {
	if err := checkIdentity(identity); err != nil {
		return simba.SessionGrant{}, fmt.Errorf("simbazk: open session: %w", err)
	}
	if lease <= 0 {
		return simba.SessionGrant{}, fmt.Errorf("simbazk: open session: lease %v must be positive", lease)
	}
	s := &session{
		b:       b,
		connSet: make(chan struct{}),
		ready:   make(chan struct{}),
		dead:    make(chan struct{}),
		done:    make(chan struct{}),
		next:    make(chan struct{}),
		names:   make(map[string]*nameLock),
		groups:  make(map[string]struct{}),
		waiting: make(map[string]time.Time),
		claims:  make(map[string]*claim),
		nodes:   make(map[string]node),
		fired:   make(map[string]struct{}),
	}
	if identity != "" {
		s.identity = []byte(identity)
	}
	if err := ctx.Err(); err != nil {
		return simba.SessionGrant{}, fmt.Errorf("simbazk: open session: %w", err)
	}
	s.timeout.Store(int64(clampTimeout(lease))) // bounds the first connect (responseTimeout)
	s.renewed.Store(time.Now().UnixNano())
	s.hosts = newHostList(func() time.Duration {
		return reconnectPause(time.Duration(s.timeout.Load()), time.Since(time.Unix(0, s.renewed.Load())))
	})
	conn, events, err := zk.Connect(b.servers, clampTimeout(lease), zk.WithHostProvider(s.hosts),
		zk.WithDialer(s.dial), zk.WithLogger(zkLogger{b.log}), zk.WithEventCallback(s.event))
	if err != nil {
		return simba.SessionGrant{}, fmt.Errorf("simbazk: open session: %w", err)
	}
	b.between("open session")
	s.conn = conn
	close(s.connSet)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		s.shut()
		for range events { // the connection's goroutines end
		}
		return simba.SessionGrant{}, ErrClosed
	}
	b.conns[s] = struct{}{}
	b.wg.Go(func() {
		for range events { // the channel closes when the connection's goroutines end
		}
		b.mu.Lock()
		delete(b.conns, s)
		b.mu.Unlock()
		close(s.done)
	})
	b.mu.Unlock()

	abandon := func(err error) (simba.SessionGrant, error) {
		b.spawn(s.closeConn)
		return simba.SessionGrant{}, err
	}
	select {
	case <-s.ready:
	case <-s.dead:
		return abandon(fmt.Errorf("simbazk: open session: %w", simba.ErrSessionExpired))
	case <-b.closing:
		return abandon(ErrClosed)
	case <-ctx.Done():
		if last := s.dialErr.Load(); last != nil {
			// The dial error is text only: its own timeout would otherwise
			// make errors.Is report DeadlineExceeded for a cancelled ctx.
			return abandon(fmt.Errorf("simbazk: open session: no Zookeeper server of %v answered (last: %v): %w", b.servers, *last, ctx.Err())) //nolint:errorlint // the cause is ctx's end; the dial error is detail
		}
		return abandon(fmt.Errorf("simbazk: open session: no session from %v yet: %w", b.servers, ctx.Err()))
	}
	if b.opts.Auth != "" {
		if _, err := call(ctx, b, "open session: add auth", func() (struct{}, error) {
			return struct{}{}, s.do(func() error { return conn.AddAuth("digest", []byte(b.opts.Auth)) })
		}); err != nil {
			return abandon(err)
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return abandon(ErrClosed)
	}
	b.sessions[s.id()] = s
	b.mu.Unlock()
	b.log.Debug("session opened", "session", s.id(), "timeout", time.Duration(s.timeout.Load()))
	return simba.SessionGrant{ID: s.id(), Remaining: time.Duration(s.timeout.Load())}, nil
}

// KeepAlive renews session id with one request (the server renews a
// session on any request) and reports, in the same call, which leases of
// req.Held it lost, which of req.Unsure it owns, and the member count of
// each group it joined. Remaining is the negotiated session timeout,
// counted by the server from the request; req.Lease is ignored, a
// Zookeeper session timeout being fixed when the session opens.
//
// Every held lease is checked, without reading each one at every renewal:
// a lease node is read with an exists-watch by the first keep-alive that
// finds it in Held, and afterwards only when its watch fired (deleted or
// changed by someone else, or replaced by the session's own new term). A
// lease whose node is gone or not this session's at the Held token is
// Lost. An unsure name is read, unless its node is under the session's
// watch, and is Owned when the node is this session's (its ephemeral
// owner), at its czxid. A renewal while Held and its Generation stay the
// same and no watch fired is one request, whatever their number.
//
// It returns simba.ErrSessionExpired once the server reported the session
// expired; such a session is never revived.
func (b *Backend) KeepAlive(ctx context.Context, id simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	s, err := b.session(id)
	if err != nil {
		return simba.KeepAliveReply{}, err
	}
	s.renewed.Store(time.Now().UnixNano())
	return call(ctx, b, "keep-alive", func() (simba.KeepAliveReply, error) { return s.keepAlive(ctx, req) })
}

// event forgets the node of a lease name whose exists-watch fired; the
// Zookeeper client calls it on its receiving goroutine for every event.
func (s *session) event(ev zk.Event) {
	name, ok := strings.CutPrefix(ev.Path, s.b.leasesDir+"/")
	if ev.Type == zk.EventSession || !ok || name == "" {
		return
	}
	s.mu.Lock()
	s.note(name, nil)
	s.mu.Unlock()
}

func (s *session) keepAlive(ctx context.Context, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	s.mu.Lock()
	groups := slices.Collect(maps.Keys(s.groups))
	s.mu.Unlock()

	// One wave: Root/leases (the renewal itself) and every group's node.
	paths := []string{s.b.leasesDir}
	for _, g := range groups {
		paths = append(paths, s.b.groupPath(g))
	}
	stats, err := s.existsAll(ctx, paths, false)
	if err != nil {
		return simba.KeepAliveReply{}, s.failed(ctx, "keep-alive", err)
	}
	reply := simba.KeepAliveReply{Remaining: time.Duration(s.timeout.Load()), Groups: make(map[string]int, len(groups)), Owned: map[string]uint64{}}
	for i, g := range groups {
		reply.Groups[g] = members(stats[1+i])
	}

	// Zookeeper delivers a watch event before the answer to any request
	// sent after the change: once the renewal is answered, every watch
	// fired by a change made before the keep-alive was sent has forgotten
	// its node. The names to read: those of Held not watched at their
	// token, unless they all were at this Generation and no node was
	// forgotten since, and those of Unsure not watched.
	s.mu.Lock()
	var names []string
	if !s.settled || s.settledGen != req.Generation {
		for name, tok := range req.Held {
			if n := s.nodes[name]; !n.watched || uint64(n.czxid) != tok {
				names = append(names, name)
			}
		}
	}
	held := len(names)
	for _, name := range req.Unsure {
		if n, ok := s.nodes[name]; ok && n.watched {
			reply.Owned[name] = uint64(n.czxid)
		} else if s.claims[name] == nil { // a staged claim is not the engine's yet
			names = append(names, name)
		}
	}
	clear(s.fired)
	s.reads++
	reads := s.reads
	s.mu.Unlock()

	lpaths := make([]string, len(names))
	for i, name := range names {
		lpaths[i] = s.b.leasePath(name)
	}
	lstats, err := s.existsAll(ctx, lpaths, true)
	if err != nil {
		return simba.KeepAliveReply{}, s.failed(ctx, "keep-alive", err)
	}
	s.mu.Lock()
	// A read is recorded unless a call, an event or a later keep-alive
	// changed what is known of its node since the reads began.
	settled := s.reads == reads
	zid := s.zid.Load()
	for i, name := range names {
		st := lstats[i]
		mine := st != nil && st.EphemeralOwner == zid
		if _, changed := s.fired[name]; changed || s.reads != reads {
			settled = false
		} else if mine {
			s.nodes[name] = node{czxid: st.Czxid, watched: true}
		} else {
			delete(s.nodes, name)
		}
		switch {
		case i < held && (!mine || uint64(st.Czxid) != req.Held[name]):
			reply.Lost = append(reply.Lost, name)
			settled = false
		case i >= held && mine:
			reply.Owned[name] = uint64(st.Czxid)
		}
	}
	if settled && len(s.fired) == 0 {
		s.settled, s.settledGen = true, req.Generation
	}
	s.mu.Unlock()
	if s.expired.Load() {
		return simba.KeepAliveReply{}, s.failed(ctx, "keep-alive", zk.ErrSessionExpired)
	}
	return reply, nil
}

// pipeline is how many reads existsAll keeps in flight.
const pipeline = 64

// existsAll reads the stat of every path, several requests in flight at a
// time on the session's connection, each with an exists-watch when watch
// is set; a missing node gives a nil stat.
func (s *session) existsAll(ctx context.Context, paths []string, watch bool) ([]*zk.Stat, error) {
	stats := make([]*zk.Stat, len(paths))
	err := inParallel(ctx, len(paths), pipeline, func(i int) (err error) {
		var ok bool
		err = s.do(func() (err error) {
			if watch {
				s.watching.Store(true)
				ok, stats[i], _, err = s.conn.ExistsW(paths[i])
			} else {
				ok, stats[i], err = s.conn.Exists(paths[i])
			}
			return err
		})
		if !ok {
			stats[i] = nil // the client's stat of a missing node is a zero one
		}
		return err
	})
	return stats, err
}

// inParallel runs f(0) to f(n-1), at most width at a time, and returns the
// first error, or ctx's once it is done: after either it starts no more.
func inParallel(ctx context.Context, n, width int, f func(i int) error) error {
	errs := make([]error, min(n, width))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if errs[w] = f(i); errs[w] != nil {
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// CloseSession ends session id at once: the server deletes its lease and
// member nodes before it answers, so other sessions can take the leases
// over right away (R-SES-4). Closing an unknown or expired session is a
// no-op. When ctx ends first, the close completes in the background.
func (b *Backend) CloseSession(ctx context.Context, id simba.SessionID) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	s, ok := b.sessions[id]
	delete(b.sessions, id)
	b.mu.Unlock()
	if !ok {
		return nil
	}
	_, err := call(ctx, b, "close session", func() (struct{}, error) {
		s.closeConn()
		return struct{}{}, nil
	})
	if errors.Is(err, ErrClosed) {
		return nil // Close closes it
	}
	return err
}
