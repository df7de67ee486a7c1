package simbazk

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// hostList is the zk.HostProvider of every connection of the backend: the
// library's own (the servers resolved once and shuffled, tried in turn),
// but with a wait of its own once every server failed in a row.
//
// The library waits a whole second then, whatever the session timeout:
// while an ensemble elects a leader every member refuses clients for a
// few hundred milliseconds, and a session of a second would expire before
// it tried again, a single server's session after any lost connection. The
// wait here is the pause of the connection (a small part of its session
// timeout), spent by Next itself, which then tells the library that no
// round of servers ended, so that the library does not wait on top.
//
// Once stop was called, Next reports the end of a round at once: that is
// when the library checks whether its connection is closing, so a closed
// connection whose servers all fail still ends its dialing.
type hostList struct {
	*zk.DNSHostProvider
	pause func() time.Duration

	stopOnce sync.Once
	stopped  chan struct{}
}

func newHostList(pause func() time.Duration) *hostList {
	return &hostList{DNSHostProvider: zk.NewDNSHostProvider(), pause: pause, stopped: make(chan struct{})}
}

// Next returns the next server to dial, after the pause when the server
// before it ended a round of failures.
func (h *hostList) Next() (server string, retryStart bool) {
	server, retryStart = h.DNSHostProvider.Next()
	if !retryStart {
		return server, false
	}
	return server, waitFor(h.stopped, h.pause())
}

// waitFor waits until ch is closed, at most d, and reports whether it was.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// stop makes Next report the end of every round from now on; call it
// before closing the connection.
func (h *hostList) stop() { h.stopOnce.Do(func() { close(h.stopped) }) }

// reconnectPause is how long a session of timeout waits once every server
// refused it in a row: a twentieth of the timeout, from 10ms to the
// library's own second, while the engine renews it. A session whose last
// KeepAlive call was a whole timeout ago or more waits a whole timeout:
// only the engine's calls may renew a session, and a connect request
// renews it on the server, so a quick reconnect would revive a session
// nobody kept alive instead of letting the server expire it (R-SES-3).
func reconnectPause(timeout, sinceRenewed time.Duration) time.Duration {
	if sinceRenewed >= timeout {
		return timeout
	}
	return min(max(timeout/20, 10*time.Millisecond), time.Second)
}
