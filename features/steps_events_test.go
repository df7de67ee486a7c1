package features

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// stuckListener is an event listener that blocks on its first event until
// it is unblocked, then records every event it gets.
type stuckListener struct {
	gate    chan struct{}
	first   sync.Once
	release sync.Once

	mu     sync.Mutex
	events []simba.Event
}

func (l *stuckListener) listen(_ context.Context, e simba.Event) {
	l.first.Do(func() { <-l.gate })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *stuckListener) unblock() { l.release.Do(func() { close(l.gate) }) }

func (l *stuckListener) got() []simba.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]simba.Event(nil), l.events...)
}

// stuck holds the stuck listener of each node that has one.
var stuck = struct {
	sync.Mutex
	of map[*node]*stuckListener
}{of: make(map[*node]*stuckListener)}

func stuckOf(n *node) *stuckListener {
	stuck.Lock()
	defer stuck.Unlock()
	return stuck.of[n]
}

// connectedStuck connects node name with a client whose only event
// listener blocks on its first event, with a queue of buffer events.
func (w *world) connectedStuck(name string, buffer int) error {
	n, err := w.connect(name, connectOptions{noEvents: true})
	if err != nil {
		return err
	}
	// The client connect built has no listener: replace it by one with the
	// stuck listener and the buffer.
	if err := n.client.Close(w.ctx); err != nil {
		return err
	}
	l := &stuckListener{gate: make(chan struct{})}
	c, err := simba.New(n.backend, simba.WithConfig(n.timing), simba.WithLogger(slog.New(n.logs)),
		simba.WithEventBuffer(buffer), simba.WithEventListener(l.listen))
	if err != nil {
		return fmt.Errorf("features: node %s: %w", name, err)
	}
	n.client = c
	n.clients = append(n.clients, c)
	stuck.Lock()
	stuck.of[n] = l
	stuck.Unlock()
	n.goBackground(func() {
		<-w.ctx.Done()
		l.unblock()
		stuck.Lock()
		delete(stuck.of, n)
		stuck.Unlock()
	})
	return n.waitLive()
}

// lockCycles takes and releases the lock lease count times on node name.
func (w *world) lockCycles(name, lease string, count int) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := n.client.Lock(w.name(lease))
	for range count {
		ctx, cancel := n.stepCtx()
		lt, err := l.Acquire(ctx)
		if err == nil {
			err = lt.Release(ctx)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("node %s: lock cycle of %s: %w", name, lease, err)
		}
	}
	return nil
}

// unblockStuck lets node name's stuck listener go on.
func (w *world) unblockStuck(name string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := stuckOf(n)
	if l == nil {
		return fmt.Errorf("features: node %s has no stuck listener", name)
	}
	l.unblock()
	return nil
}

// droppedRightAfterFirst checks that node name's stuck listener got, right
// after the event it was stuck on, an EventDropped counting at least min
// events and every drop the client counted (the dropped were all older
// than what waited), then at least the buffer's worth of kept events.
func (w *world) droppedRightAfterFirst(name string, least int) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := stuckOf(n)
	if l == nil {
		return fmt.Errorf("features: node %s has no stuck listener", name)
	}
	var evs []simba.Event
	if err := w.eventually(time.Second, "the stuck listener got fewer than 3 events", func() bool {
		evs = l.got()
		return len(evs) >= 3
	}); err != nil {
		return err
	}
	d := evs[1]
	switch {
	case d.Kind != simba.EventDropped:
		return fmt.Errorf("node %s's listener got %v right after its first event, want Dropped", name, d)
	case d.Dropped < least:
		return fmt.Errorf("node %s's listener was told of %d dropped events, want at least %d", name, d.Dropped, least)
	case uint64(d.Dropped) != n.client.EventsDropped():
		return fmt.Errorf("node %s's listener was told of %d dropped events, the client counted %d", name, d.Dropped, n.client.EventsDropped())
	}
	for _, e := range evs[2:] {
		if e.Kind == simba.EventDropped {
			return fmt.Errorf("node %s's listener got a second %v, with no drop since the first", name, e)
		}
	}
	return nil
}
