package simbazk

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// watchTimeout is the session timeout of the connection that carries the
// release watches and the holder reads. It holds no ephemeral node, so its
// length only decides how long the watches survive a lost connection.
const watchTimeout = 10 * time.Second

// watchConn is the backend's read connection: release watches and the
// reads of Holder. Unlike a session's, it may silently move to a new
// Zookeeper session after an expiry: the watches it had fire then (a
// spurious wake-up) and later ones work on the new session.
type watchConn struct {
	conn  *zk.Conn
	links links         // the network connection, closed by close
	done  chan struct{} // closed when the connection's goroutines ended
	once  sync.Once
	auth  chan struct{} // closed once the connection is set up (Auth added)
	err   error         // the set-up's error, readable after auth is closed
}

// close closes the connection and waits for its goroutines, within about
// a second whatever the server does (see session.closeConn).
func (w *watchConn) close() {
	w.once.Do(func() {
		w.conn.Close()
		w.links.close()
	})
	<-w.done
}

// releaseWatch is one Zookeeper watch on a lease node, shared by every
// WatchRelease caller of that name until it fires.
type releaseWatch struct {
	fired chan struct{}
	// callers still waiting (their ctx not done) and the functions that
	// stop counting them; guarded by Backend.mu.
	callers int
	stops   []func() bool
}

// join counts a caller of WatchRelease until ctx is done or w fires.
// b.mu must be held.
func (b *Backend) join(ctx context.Context, w *releaseWatch) {
	w.callers++
	w.stops = append(w.stops, context.AfterFunc(ctx, func() {
		b.mu.Lock()
		w.callers--
		b.mu.Unlock()
	}))
}

// waited reports whether a caller still waits for w.
func (b *Backend) waited(w *releaseWatch) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return w.callers > 0
}

// WatchRelease returns a channel that is closed once the lease name may
// have become free: its node was deleted (a release, or the owner's session
// ended) or changed. When the node does not exist, the channel is already
// closed. Every caller watching a name shares one Zookeeper watch, set with
// one exists request when the first one asks; later callers pay nothing.
//
// A Zookeeper watch cannot be removed: when ctx is done the caller stops
// waiting, the watch stays until the node changes or Close. Close fires
// every pending watch and ends its goroutine. A lost watch connection also
// fires the watches (spurious wake-ups are allowed by the contract).
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
	w := &releaseWatch{fired: make(chan struct{})}
	b.watches[name] = w
	b.join(ctx, w)
	wc, err := b.watchConnLocked()
	b.mu.Unlock()
	if err != nil {
		b.fire(name, w)
		return nil, err
	}

	path := b.leasePath(name)
	set := make(chan error, 1)
	if !b.spawn(func() {
		<-wc.auth
		if wc.err != nil {
			set <- wc.err
			b.fire(name, w)
			b.dropWatcher(wc)
			return
		}
		exists, _, ev, err := wc.conn.ExistsW(path)
		if err != nil || !exists {
			// Fired before WatchRelease returns: a free lease is seen at once.
			b.fire(name, w)
			set <- err
			return
		}
		set <- nil
		var claim func()
		select {
		case e := <-ev: // deleted, changed, or the connection lost its watches
			if e.Type == zk.EventNodeDeleted && b.waited(w) {
				claim = b.claimFor(name) // locks the name before the wake-up
			}
		case <-b.closing:
		}
		b.fire(name, w)
		if claim != nil {
			claim()
		}
	}) {
		b.fire(name, w)
		return nil, ErrClosed
	}
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
func (b *Backend) fire(name string, w *releaseWatch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.watches[name] == w {
		delete(b.watches, name)
		close(w.fired)
		for _, stop := range w.stops {
			if stop() {
				w.callers--
			}
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
	w := &watchConn{done: make(chan struct{}), auth: make(chan struct{})}
	conn, events, err := zk.Connect(b.servers, watchTimeout,
		zk.WithDialer(func(network, address string, _ time.Duration) (net.Conn, error) {
			c, err := b.dialRaw(context.Background(), network, address)
			if err != nil {
				return nil, err
			}
			if !w.links.add(c) {
				return nil, errLinksClosed
			}
			return &boundedConn{Conn: c}, nil
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
	// Before the first watch: add Auth, then one plain round trip. The
	// Zookeeper client reads its last zxid unsynchronised right after it
	// connects when watches are already registered; letting that moment
	// pass first keeps the race detector quiet about it.
	b.wg.Go(func() {
		defer close(w.auth)
		if b.opts.Auth != "" {
			if w.err = conn.AddAuth("digest", []byte(b.opts.Auth)); w.err != nil {
				return
			}
		}
		_, _, w.err = conn.Exists(b.opts.Root)
	})
	b.watcher = w
	return w, nil
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
