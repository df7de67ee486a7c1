package simbazk

import (
	"errors"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// A backend's node in the queue of a lease (see watchQueued) is deleted
// when its watch ends. That delete, or the create of the node, can fail
// with its connection while the server did it or not: the answer is lost,
// not the request. A node left behind would stay first in the queue for
// as long as the read connection's session lives, and the backends queued
// after it would never be woken by a release again (only their engine's
// own retries would find the lease free). So each backend names its queue
// nodes with a prefix of its own, and after such a failure it sweeps the
// queue dir: every node with its prefix that no watch of the backend uses
// is deleted, again after a pause until a sweep succeeds.

// queueSeq returns the sequence number the server appended to a queue
// node's name (ten digits), by which the queue is ordered.
func queueSeq(node string) string {
	const digits = 10
	if len(node) < digits {
		return node
	}
	return node[len(node)-digits:]
}

// queuedAs records me as the node a watch of the backend uses in the queue
// dir; left forgets it, unless a later watch has queued meanwhile.
func (b *Backend) queuedAs(dir, me string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queued[dir] = me
}

func (b *Backend) left(dir, me string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queued[dir] == me {
		delete(b.queued, dir)
	}
}

// Pauses between the sweeps of a queue dir, doubled after each failed one.
const (
	sweepFirst = 50 * time.Millisecond
	sweepMost  = time.Second
)

// sweepLater schedules a sweep of the queue dir, on a goroutine of its
// own, unless one is scheduled already.
func (b *Backend) sweepLater(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sweeps[dir]; ok || b.closed {
		return
	}
	b.sweeps[dir] = struct{}{}
	b.wg.Go(func() { b.sweep(dir) })
}

// sweep sweeps dir after a pause, again after a longer one while it
// fails, until a sweep succeeded or the backend closes.
func (b *Backend) sweep(dir string) {
	defer func() {
		b.mu.Lock()
		delete(b.sweeps, dir)
		b.mu.Unlock()
	}()
	for wait := sweepFirst; ; wait = min(2*wait, sweepMost) {
		if waitFor(b.closing, wait) {
			return
		}
		b.mu.Lock()
		wc := b.watcher
		b.mu.Unlock()
		// Without a read connection its session, and every node it had,
		// is gone.
		if wc == nil || b.sweepDir(wc, dir) == nil {
			return
		}
	}
}

// sweepDir deletes the backend's nodes in the queue dir that no watch of
// the backend uses.
func (b *Backend) sweepDir(wc *watchConn, dir string) error {
	var children []string
	err := wc.do(func() (err error) { children, _, err = wc.conn.Children(dir); return err })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	b.mu.Lock()
	live := b.queued[dir]
	b.mu.Unlock()
	for _, c := range children {
		path := dir + "/" + c
		if !strings.HasPrefix(c, b.queuePrefix) || path == live {
			continue
		}
		err := wc.do(func() error { return wc.conn.Delete(path, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}
