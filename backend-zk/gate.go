package simbazk

import (
	"encoding/binary"
	"sync"
	"time"
)

// After a reconnect, the Zookeeper client sets its watches again: right
// after it starts its receiving goroutine, it reads the last zxid it saw,
// without synchronisation, to build the set-watches request, while that
// goroutine writes the zxid of every answer it reads. The race detector
// reports it whenever an answer (to a request queued during the outage,
// say) is read first, and the request then carries the later zxid (see
// session.distrustWatches for what that costs). setWatchesGate orders the
// two: on a connection whose client may hold watches, the first read after
// the connect response waits until the set-watches request was written,
// which the client does only after its read, or at most setWatchesWait.
type setWatchesGate struct {
	once   sync.Once
	sent   chan struct{} // closed once a set-watches request was written
	passed bool          // the first read after the connect response waited; read side only
}

// setWatchesWait bounds the wait of the gate: the client sends no
// set-watches request when it holds no watch, and waits for the answers to
// its authentication before it sends anything.
const setWatchesWait = 50 * time.Millisecond

// opSetWatches is the opcode of the set-watches request.
const opSetWatches = 101

func newSetWatchesGate() setWatchesGate { return setWatchesGate{sent: make(chan struct{})} }

// wrote looks at one packet the client writes (length, xid, opcode, ...).
func (g *setWatchesGate) wrote(p []byte) {
	if len(p) >= 12 && int32(binary.BigEndian.Uint32(p[8:12])) == opSetWatches {
		g.once.Do(func() { close(g.sent) })
	}
}

// firstRead is called by every read after the connect response; the
// first one waits, when watching says the client may hold watches.
func (g *setWatchesGate) firstRead(watching bool) {
	if g.passed {
		return
	}
	g.passed = true
	if watching {
		waitFor(g.sent, setWatchesWait)
	}
}
