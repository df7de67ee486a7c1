package simbazk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// watchTimeout is the session timeout of the connection that carries the
// release watches and the holder reads. It holds no ephemeral node, so its
// length only decides how long the watches survive a lost connection.
const watchTimeout = 10 * time.Second

// watchReconnectPause is how long the watch connection waits once every
// server refused it in a row (see hostList): the release watches of the
// waiting sessions need it back as soon as an ensemble elected a leader.
const watchReconnectPause = 50 * time.Millisecond

// watchConn is the backend's read connection: release watches and the
// reads of Holder. Unlike a session's, it may silently move to a new
// Zookeeper session after an expiry: the watches it had fire then (a
// spurious wake-up) and later ones work on the new session.
type watchConn struct {
	inflight // every request on conn goes through do
	conn     *zk.Conn
	watching atomic.Bool   // a watch was set (see setWatchesGate)
	hosts    *hostList     // stopped by close
	links    links         // the network connection, closed by close
	done     chan struct{} // closed when the connection's goroutines ended
	once     sync.Once
	setUp    sync.Once // runs the set-up, see ready
	err      error     // the set-up's error, readable once setUp ran
}

// close closes the connection and waits for its goroutines. It first lets
// the requests in flight end and refuses new ones (see inflight): the
// library reads the response of some after a close while its receiver
// may still write it, and a request sent while it closes can block its
// goroutines for good. A request unanswered within closeGrace drops the
// network connection, which ends it: a request sent fails at once, and
// one still queued (behind a connect request the server never answered)
// once the library's next dial ends a round of servers, which the host
// list, stopped first, reports at once. close returns within about
// closeGrace and a second whatever the server does (see
// session.closeConn), and within watchTimeout should the library not end
// its requests.
func (w *watchConn) close() {
	w.once.Do(func() {
		w.hosts.stop()
		w.quiesce(closeGrace, watchTimeout, w.links.close)
		w.conn.Close()
		w.links.close()
	})
	<-w.done
}

// closeGrace is how long the close of a connection (the watch
// connection's, a session's) lets its requests in flight end before it
// drops the network connection.
const closeGrace = 500 * time.Millisecond

// releaseWatch is one Zookeeper watch on a lease node, shared by every
// WatchRelease caller of that name until it fires.
type releaseWatch struct {
	name  string
	fired chan struct{}
	quit  chan struct{} // closed when the last caller left before it fired
	// By caller still waiting (its ctx not done), the function that stops
	// counting it; guarded by Backend.mu. A caller whose ctx ended leaves,
	// so a watch on a lease held for long while callers come and go keeps
	// only those still waiting.
	stops  map[uint64]func() bool
	joined uint64 // callers ever counted: the key of the next one
}

// join counts a caller of WatchRelease until ctx is done or w fires.
// b.mu must be held.
func (b *Backend) join(ctx context.Context, w *releaseWatch) {
	id := w.joined
	w.joined++
	w.stops[id] = context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(w.stops, id)
		if len(w.stops) == 0 && b.watches[w.name] == w {
			// Nobody waits any more: the watch leaves the queue, and the
			// next caller starts a new one.
			delete(b.watches, w.name)
			close(w.quit)
		}
	})
}

// waited reports whether a caller still waits for w.
func (b *Backend) waited(w *releaseWatch) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(w.stops) > 0
}

// WatchRelease returns a channel that is closed once the lease name may
// have become free: its node was deleted (a release, or the owner's session
// ended) or changed. When the node does not exist, the channel is already
// closed. Every caller watching a name shares one watch of the backend,
// set up when the first one asks; later callers pay nothing. While the
// lease is held the backend queues for it (see watchQueued), so that a
// release wakes the first waiting backend only: a channel may therefore
// stay open after a release another backend was woken for, until that
// backend has taken the lease or left the queue and the lease is released
// again.
//
// When ctx is done the caller stops waiting; when the last caller of a
// name stopped, the backend leaves the queue (a Zookeeper watch cannot be
// removed: it stays until the node changes or Close). Close fires every
// pending watch and ends its goroutine. A lost watch connection also fires
// the watches (spurious wake-ups are allowed by the contract).
func (b *Backend) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	if err := simba.ValidateName(name); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	if w, ok := b.watches[name]; ok {
		b.join(ctx, w)
		b.mu.Unlock()
		return w.fired, nil
	}
	w := &releaseWatch{name: name, fired: make(chan struct{}), quit: make(chan struct{}), stops: make(map[uint64]func() bool)}
	b.watches[name] = w
	b.join(ctx, w)
	wc, err := b.watchConnLocked()
	if err != nil {
		b.mu.Unlock()
		b.fire(w)
		return nil, err
	}
	set := make(chan error, 1)
	b.wg.Go(func() { b.watchQueued(wc, w, set) }) // the backend is open: b.mu is held
	b.mu.Unlock()

	select {
	case err := <-set:
		if err != nil {
			return nil, fmt.Errorf("simbazk: watch release %s: %w", name, err)
		}
		return w.fired, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("simbazk: watch release %s: %w", name, ctx.Err())
	}
}

// fire closes w and forgets it, so that the next caller sets a new watch.
func (b *Backend) fire(w *releaseWatch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.watches[w.name] == w {
		delete(b.watches, w.name)
		close(w.fired)
		for _, stop := range w.stops {
			stop()
		}
		w.stops = nil
	}
}

// watchConnLocked returns the watch connection (which Holder reads over
// too), dialing it on first use.
// b.mu must be held and the backend open.
func (b *Backend) watchConnLocked() (*watchConn, error) {
	if b.watcher != nil {
		return b.watcher, nil
	}
	w := &watchConn{done: make(chan struct{})}
	w.hosts = newHostList(func() time.Duration { return watchReconnectPause })
	conn, events, err := zk.Connect(b.servers, watchTimeout, zk.WithHostProvider(w.hosts),
		zk.WithDialer(func(network, address string, _ time.Duration) (net.Conn, error) {
			return b.dialLink(&w.links, nil, &w.watching, network, address)
		}),
		zk.WithLogger(zkLogger{b.log}))
	if err != nil {
		return nil, fmt.Errorf("simbazk: watch connection: %w", err)
	}
	w.conn = conn
	b.wg.Go(func() {
		for range events {
		}
		close(w.done)
	})
	b.watcher = w
	return w, nil
}

// onReadConn runs f through call on the read connection, dialed on first
// use, once it is set up; its error is prefixed with op.
func onReadConn[T any](ctx context.Context, b *Backend, op string, f func(wc *watchConn) (T, error)) (T, error) {
	var zero T
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return zero, ErrClosed
	}
	wc, err := b.watchConnLocked()
	b.mu.Unlock()
	if err != nil {
		return zero, err
	}
	return call(ctx, b, op, func() (T, error) {
		v, err := zero, wc.ready(b)
		if err == nil {
			v, err = f(wc)
		}
		if err != nil {
			return zero, fmt.Errorf("simbazk: %s: %w", op, err)
		}
		return v, nil
	})
}

// ready sets the connection up, or waits until the first caller did, and
// returns the set-up's error, after which the backend's next call dials a
// new one. The set-up comes before the first watch: add Auth, then one
// plain round trip. The Zookeeper client reads its last zxid
// unsynchronised right after it connects when watches are already
// registered; letting that moment pass first keeps the race detector
// quiet about it.
func (w *watchConn) ready(b *Backend) error {
	w.setUp.Do(func() {
		if b.opts.Auth != "" {
			w.err = w.do(func() error { return w.conn.AddAuth("digest", []byte(b.opts.Auth)) })
		}
		if w.err == nil {
			w.err = w.do(func() error { _, _, err := w.conn.Exists(b.opts.Root); return err })
		}
	})
	if w.err != nil {
		b.dropWatcher(w)
	}
	return w.err
}

// dropWatcher closes a watch connection that could not be used, so that
// the next WatchRelease or Holder dials a new one.
func (b *Backend) dropWatcher(wc *watchConn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.watcher != wc {
		return // Close, or an earlier drop, closes it
	}
	b.watcher = nil
	b.wg.Go(wc.close)
}

// watchQueued runs the release watch w on wc, once wc is set up (see
// watchConn.ready): when the lease is free it fires at once;
// otherwise the backend queues for the name, an
// ephemeral sequential node of the read connection's session under
// Root/waiters/{name} (a container node, which the server removes once
// empty; the node's name carries the backend's prefix, see queue.go, so
// that a node whose create or delete lost its answer is swept), and only
// the first backend of the queue watches the lease node,
// each other one the node before its own. A release therefore wakes one
// backend, not every one that waits; that backend's node leaves the queue
// once it fired (after its claim, see claimFor), which wakes the next one
// to watch the lease node. set receives the outcome of the first request.
func (b *Backend) watchQueued(wc *watchConn, w *releaseWatch, set chan<- error) {
	name := w.name
	var once sync.Once
	signal := func(err error) { once.Do(func() { set <- err }) } // once the watch is armed, or at the end
	defer signal(nil)
	path := b.leasePath(name)
	var exists bool
	err := wc.ready(b)
	if err == nil {
		err = wc.do(func() (err error) { exists, _, err = wc.conn.Exists(path); return err })
	}
	if err != nil || !exists {
		b.fire(w) // a free lease is seen at once
		signal(err)
		return
	}
	dir := b.opts.Root + "/waiters/" + name
	me, err := b.enqueue(wc, dir)
	if err != nil {
		me = "" // no place in the queue: watch the lease node itself
		if !errors.Is(err, zk.ErrNoNode) {
			b.sweepLater(dir) // the create may have been done
		}
	}
	if me != "" {
		b.queuedAs(dir, me)
	}
	defer func() {
		if me == "" {
			return
		}
		b.left(dir, me)
		err := wc.do(func() error { return wc.conn.Delete(me, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			b.sweepLater(dir) // the node may still be there
		}
	}()
	// Every way out fires w, before the node leaves the queue: a no-op
	// once fired, or once the last caller left (w.quit).
	defer b.fire(w)
	for {
		target := path
		if me != "" {
			pred, err := predecessor(wc, dir, me)
			if err != nil {
				return
			}
			if pred != "" {
				target = pred
			}
		}
		var ok bool
		var ev <-chan zk.Event
		wc.watching.Store(true)
		err := wc.do(func() (err error) { ok, _, ev, err = wc.conn.ExistsW(target); return err })
		switch {
		case err != nil:
			signal(err)
			return
		case !ok && target == path:
			return // freed meanwhile
		case !ok:
			continue // the node before ours left: look again
		}
		signal(nil)
		select {
		case e := <-ev: // deleted, changed, or the connection lost its watches
			if target != path && e.Type == zk.EventNodeDeleted {
				continue
			}
			if target == path && e.Type == zk.EventNodeDeleted && b.waited(w) {
				if claim := b.claimFor(name); claim != nil { // locks the name before the wake-up
					b.fire(w)
					claim()
				}
			}
			return
		case <-w.quit:
			return
		case <-b.closing:
			return
		}
	}
}

// enqueue creates the backend's node in the queue dir of a lease name and
// returns its path, creating dir (a container) and its parents if needed.
func (b *Backend) enqueue(wc *watchConn, dir string) (string, error) {
	var me string
	create := func() (err error) {
		me, err = wc.conn.Create(dir+"/"+b.queuePrefix, nil, zk.FlagEphemeralSequential, b.opts.ACL)
		return err
	}
	err := wc.do(create)
	if !errors.Is(err, zk.ErrNoNode) {
		return me, err
	}
	if err := wc.do(func() error { return b.ensureParents(wc.conn, dir) }); err != nil {
		return "", err
	}
	err = wc.do(func() error {
		_, err := wc.conn.CreateContainer(dir, nil, zk.FlagContainer, b.opts.ACL)
		return err
	})
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return "", err
	}
	err = wc.do(create)
	return me, err
}

// predecessor returns the path of the node just before me in the queue
// dir, or "" when me is first.
func predecessor(wc *watchConn, dir, me string) (string, error) {
	var children []string
	err := wc.do(func() (err error) { children, _, err = wc.conn.Children(dir); return err })
	if err != nil {
		return "", err
	}
	// Each backend names its nodes with a prefix of its own: the order is
	// that of the sequence numbers the server appended.
	slices.SortFunc(children, func(a, b string) int { return strings.Compare(queueSeq(a), queueSeq(b)) })
	base := me[len(dir)+1:]
	i := slices.Index(children, base)
	switch {
	case i < 0:
		return "", fmt.Errorf("simbazk: queue node %s is gone", me)
	case i == 0:
		return "", nil
	default:
		return dir + "/" + children[i-1], nil
	}
}
