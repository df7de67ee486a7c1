package simba_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// eventLog records the events a listener got, with the (fake) time each
// one was delivered.
type eventLog struct {
	mu        sync.Mutex
	events    []simba.Event
	delivered []time.Time
}

func (l *eventLog) listen(_ context.Context, e simba.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	l.delivered = append(l.delivered, time.Now())
}

// lockEvents returns the Elected and Revoked events of locks, and when
// each was delivered.
func (l *eventLog) lockEvents() ([]simba.Event, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var evs []simba.Event
	var at []time.Time
	for i, e := range l.events {
		if e.Lock {
			evs = append(evs, e)
			at = append(at, l.delivered[i])
		}
	}
	return evs, at
}

// inlineExecutor runs each callback on the goroutine that hands it over:
// every batch of events is delivered before the next event comes, so a
// burst uses up the deliveries allowed at once and the rest must wait.
type inlineExecutor struct{}

func (inlineExecutor) Execute(task func()) error {
	task()
	return nil
}

// burst acquires and releases the lock n times in one instant. After each
// pair it lets the events dispatcher take what is pending, as a listener
// that keeps up would, so the ninth pair and later go past eventBurst
// deliveries in the instant and wait for the linger whatever the
// scheduler does.
func burst(t *testing.T, c *simba.Client, n int) {
	t.Helper()
	l := c.Lock("burst")
	for range n {
		lt, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := lt.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
	}
}

// checkBurst fails unless events holds the n terms of burst in order, as
// Elected then Revoked(Stopped), each with strictly increasing tokens.
func checkBurst(t *testing.T, evs []simba.Event, n int) {
	t.Helper()
	if len(evs) != 2*n {
		t.Fatalf("%d lock events, want %d", len(evs), 2*n)
	}
	var last uint64
	for i := 0; i < len(evs); i += 2 {
		won, ended := evs[i], evs[i+1]
		if won.Kind != simba.EventElected || ended.Kind != simba.EventRevoked || ended.Reason != simba.Stopped {
			t.Fatalf("events %d-%d: %v, %v; want Elected then Revoked(STOPPED)", i, i+1, won, ended)
		}
		if won.Token <= last || ended.Token != won.Token {
			t.Fatalf("events %d-%d: tokens %d, %d after %d", i, i+1, won.Token, ended.Token, last)
		}
		last = won.Token
	}
}

func TestEventBurstDeliveredInOrderWithinALinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		c := newClient(t, memory.New().Connect(), simba.WithEventListener(log.listen),
			simba.WithCallbackExecutor(inlineExecutor{}))
		const n = 100
		burst(t, c, n)
		synctest.Wait()
		if evs, _ := log.lockEvents(); len(evs) == 2*n {
			t.Fatalf("all %d events delivered in the instant of the burst, want some held for the linger", len(evs))
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()

		evs, at := log.lockEvents()
		checkBurst(t, evs, n)
		for i, e := range evs {
			if late := at[i].Sub(e.Time); late < 0 || late > time.Millisecond {
				t.Fatalf("event %d (%v) delivered %v after it happened, want at most 1ms", i, e, late)
			}
		}
	})
}

func TestCloseDeliversTheEventsOfABurstAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		c := newClient(t, memory.New().Connect(), simba.WithEventListener(log.listen),
			simba.WithCallbackExecutor(inlineExecutor{}))
		const n = 50
		burst(t, c, n)
		if evs, _ := log.lockEvents(); len(evs) == 2*n {
			t.Fatal("no event of the burst waits for the linger")
		}
		start := time.Now()
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close took %v of fake time, want 0", d)
		}
		evs, _ := log.lockEvents()
		checkBurst(t, evs, n)
	})
}

func TestEventsAddNoAllocationToAcquireRelease(t *testing.T) {
	allocs := func(opts ...simba.Option) float64 {
		c := newClient(t, memory.New(), opts...)
		l := c.Lock("allocs")
		cycle := func() {
			lt, err := l.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := lt.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for range 1000 { // grow the buffers
			cycle()
		}
		return testing.AllocsPerRun(1000, cycle)
	}
	off := allocs()
	on := allocs(simba.WithEventListener(func(context.Context, simba.Event) {}))
	if on > off {
		t.Fatalf("acquire+release: %.1f allocations with an event listener, %.1f without", on, off)
	}
}

// blockedListener blocks on its first event until unblock is called, then
// records every event it gets.
type blockedListener struct {
	eventLog
	gate    chan struct{}
	first   sync.Once
	release sync.Once
}

func newBlockedListener() *blockedListener { return &blockedListener{gate: make(chan struct{})} }

func (l *blockedListener) listen(ctx context.Context, e simba.Event) {
	l.first.Do(func() { <-l.gate })
	l.eventLog.listen(ctx, e)
}

func (l *blockedListener) unblock() { l.release.Do(func() { close(l.gate) }) }

// cycles acquires and releases the lock n times.
func cycles(t *testing.T, c *simba.Client, n int) {
	t.Helper()
	l := c.Lock("cycles")
	for range n {
		lt, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := lt.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A listener that does not keep up keeps at most the bound of events
// waiting: past it the oldest are dropped.
func TestBlockedListenerKeepsAtMostTheBound(t *testing.T) {
	t.Run("default", func(t *testing.T) { testBlockedListenerBound(t, simba.DefaultEventBuffer, nil) })
	t.Run("1000", func(t *testing.T) { testBlockedListenerBound(t, 1000, nil, simba.WithEventBuffer(1000)) })
	// SessionOpened and a BackendWarning are handed over together: the
	// warning, waiting behind the event the listener blocks on, is the
	// first dropped, and its drop is counted in the same EventDropped as
	// those of the queue after it.
	t.Run("warning", func(t *testing.T) {
		testBlockedListenerBound(t, 16, []simba.Warning{{Code: "w", Message: "a setup warning"}}, simba.WithEventBuffer(16))
	})
}

func testBlockedListenerBound(t *testing.T, bound int, warnings []simba.Warning, opts ...simba.Option) {
	synctest.Test(t, func(t *testing.T) {
		l := newBlockedListener()
		srv := memory.New()
		srv.SetWarnings(warnings...)
		c := newClient(t, srv.Connect(), append(opts, simba.WithEventListener(l.listen))...)
		defer l.unblock()
		synctest.Wait() // SessionOpened reached the listener, which blocks on it
		const n = 20000
		cycles(t, c, n)
		synctest.Wait()
		l.unblock()
		time.Sleep(time.Millisecond) // past any linger
		synctest.Wait()

		l.mu.Lock()
		defer l.mu.Unlock()
		// The first event was in the listener's hands; the rest waited, at
		// most the bound of them, the newest. The count of the others came
		// first: they were older.
		emitted := 1 + len(warnings) + 2*n // SessionOpened, its warnings, then an Elected and a Revoked per cycle
		evs := l.events
		last := evs[1]
		if last.Kind != simba.EventDropped {
			t.Fatalf("second event %v, want Dropped", last)
		}
		waited := evs[2:]
		if len(waited) != bound {
			t.Fatalf("%d events waited for the blocked listener, want the bound, %d", len(waited), bound)
		}
		if want := emitted - 1 - bound; last.Dropped != want {
			t.Fatalf("Dropped = %d, want %d", last.Dropped, want)
		}
		if got := c.EventsDropped(); got != uint64(last.Dropped) {
			t.Fatalf("EventsDropped() = %d, want %d", got, last.Dropped)
		}
		// The oldest were dropped: what waited is the last of the cycles,
		// in order.
		for i, e := range waited {
			if !e.Lock || e.Token != waited[0].Token+uint64(i/2) {
				t.Fatalf("event %d waiting: %v, want the lock's newest events in order", i, e)
			}
		}
		if e := waited[len(waited)-1]; e.Kind != simba.EventRevoked || e.Token != n {
			t.Fatalf("newest event %v, want the Revoked of token %d", e, n)
		}
		for _, e := range waited {
			if e.Kind == simba.EventDropped {
				t.Fatalf("%v among the events kept", e)
			}
		}
	})
}

// A listener that falls behind delays itself only: another listener of
// the client gets every event.
func TestBlockedListenerDelaysNoOtherListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blocked := newBlockedListener()
		var log eventLog
		c := newClient(t, memory.New().Connect(), simba.WithEventListener(blocked.listen),
			simba.WithEventListener(log.listen), simba.WithEventBuffer(16))
		defer blocked.unblock()
		synctest.Wait()
		const n = 100
		burst(t, c, n)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		evs, _ := log.lockEvents()
		checkBurst(t, evs, n)
		if got := c.EventsDropped(); got != 2*n-16 {
			t.Fatalf("EventsDropped() = %d, want %d", got, 2*n-16)
		}
	})
}

// Close with a listener that never returns gives up when its ctx ends.
func TestCloseWithABlockedListenerIsBoundedByItsCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newBlockedListener()
		c := newClient(t, memory.New().Connect(), simba.WithEventListener(l.listen))
		defer l.unblock()
		synctest.Wait()
		cycles(t, c, 100)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := c.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want an error matching context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("Close returned after %v, want 2s", d)
		}
	})
}

// Close waits for a slow listener to get what its queue holds, which is at
// most the bound, not every event since it fell behind; and before it
// returns the listener has got every event kept, SessionClosed last, and
// the EventDropped of the others.
func TestCloseWaitsForAtMostTheBoundOfASlowListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		slow := func(ctx context.Context, e simba.Event) {
			log.listen(ctx, e)
			time.Sleep(time.Millisecond)
		}
		c := newClient(t, memory.New().Connect(), simba.WithEventListener(slow))
		synctest.Wait()
		const n = 20000
		cycles(t, c, n) // 40,000 events; no fake time passes, so the listener is on its first
		start := time.Now()
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		log.mu.Lock()
		defer log.mu.Unlock()
		// The first event, the bound, SessionClosed and the Dropped event.
		if limit := time.Duration(simba.DefaultEventBuffer+3) * time.Millisecond; took > limit {
			t.Fatalf("Close waited %v for a listener that takes 1ms an event (it got %d events), want at most %v", took, len(log.events), limit)
		}
		reports, dropped := checkDrops(t, log.events, n)
		if reports == 0 {
			t.Fatal("no EventDropped before Close returned")
		}
		if kept := len(log.events) - reports; kept+dropped != 2*n+2 {
			t.Fatalf("%d events kept and %d dropped, want %d in all", kept, dropped, 2*n+2)
		}
		if got := c.EventsDropped(); got != uint64(dropped) {
			t.Fatalf("EventsDropped() = %d, the EventDropped events count %d", got, dropped)
		}
	})
}

// eventIndex numbers the events of a client that opens a session and then
// runs lock cycles: SessionOpened 0, the Elected and Revoked of token k
// 2k-1 and 2k, SessionClosed after the last cycle n.
func eventIndex(t *testing.T, e simba.Event, n int) int {
	t.Helper()
	switch {
	case e.Kind == simba.EventSessionOpened:
		return 0
	case e.Kind == simba.EventSessionClosed:
		return 2*n + 1
	case e.Kind == simba.EventElected && e.Lock:
		return 2*int(e.Token) - 1
	case e.Kind == simba.EventRevoked && e.Lock:
		return 2 * int(e.Token)
	}
	t.Fatalf("unexpected event %v", e)
	return 0
}

// checkDrops fails unless evs is what a listener of a client that ran n
// lock cycles got: the events in order, each gap of missed events right
// before the next event it got, counted exactly by the EventDropped
// events there (so what was dropped was always the oldest waiting), and
// ending with SessionClosed. It returns how many EventDropped came and
// how many events they counted.
func checkDrops(t *testing.T, evs []simba.Event, n int) (reports, dropped int) {
	t.Helper()
	next, pending := 0, 0
	for i, e := range evs {
		if e.Kind == simba.EventDropped {
			if e.Dropped <= 0 {
				t.Fatalf("event %d: %v counts nothing", i, e)
			}
			reports++
			pending += e.Dropped
			dropped += e.Dropped
			continue
		}
		idx := eventIndex(t, e, n)
		if gap := idx - next; gap != pending {
			t.Fatalf("event %d (%v): %d events missed before it, %d reported right before it", i, e, gap, pending)
		}
		next, pending = idx+1, 0
	}
	if pending != 0 || next != 2*n+2 {
		t.Fatalf("the events end at index %d with %d drops reported after the last one, want SessionClosed last", next-1, pending)
	}
	return reports, dropped
}

// A listener that never catches up still hears of its drops, each time
// right where the events it missed were, not only once its queue is empty;
// and the events dropped are always the oldest waiting, those already
// taken for it included.
func TestSlowListenerHearsOfDropsWhereTheyHappened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		slow := func(ctx context.Context, e simba.Event) {
			log.listen(ctx, e)
			time.Sleep(time.Millisecond)
		}
		c := newClient(t, memory.New().Connect(), simba.WithEventListener(slow), simba.WithEventBuffer(16))
		synctest.Wait()
		const n = 2000 // 0.8s of cycles, before the first keep-alive
		l := c.Lock("cycles")
		for range n {
			lt, err := l.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := lt.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(400 * time.Microsecond)
		}
		log.mu.Lock()
		during := 0
		for _, e := range log.events {
			if e.Kind == simba.EventDropped {
				during++
			}
		}
		log.mu.Unlock()
		if during == 0 {
			t.Fatalf("no EventDropped while the listener lagged; %d events dropped", c.EventsDropped())
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		reports, dropped := checkDrops(t, log.events, n)
		if got := c.EventsDropped(); got != uint64(dropped) {
			t.Fatalf("EventsDropped() = %d, the EventDropped events count %d", got, dropped)
		}
		t.Logf("%d events dropped, counted by %d EventDropped (%d while the cycles ran)", dropped, reports, during)
	})
}

// warningEvents returns the BackendWarning events the listener got.
func (l *eventLog) warningEvents() []simba.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var evs []simba.Event
	for _, e := range l.events {
		if e.Kind == simba.EventBackendWarning {
			evs = append(evs, e)
		}
	}
	return evs
}

func TestBackendWarningsPublishedOncePerSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memory.New()
		replicas := simba.Warning{Code: "replicas", Message: "replicas without the durable option"}
		eviction := simba.Warning{Code: "eviction", Message: "an eviction policy"}
		srv.SetWarnings(replicas, eviction, replicas)
		var log eventLog
		var logged bytes.Buffer
		c := newClient(t, srv, simba.WithEventListener(log.listen),
			simba.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
		if _, err := c.Lock("w").Acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		first := c.Snapshot().Session.ID
		check := func(evs []simba.Event, session simba.SessionID) {
			t.Helper()
			if len(evs) != 2 || evs[0].Warning != replicas || evs[1].Warning != eviction {
				t.Fatalf("warning events %v, want %v then %v once each", evs, replicas, eviction)
			}
			for _, e := range evs {
				if e.Session != session {
					t.Fatalf("%v: session %q, want %q", e, e.Session, session)
				}
			}
		}
		check(log.warningEvents(), first)
		if n := strings.Count(logged.String(), "code=replicas"); n != 1 {
			t.Fatalf("the replicas warning logged %d times, want once:\n%s", n, logged.String())
		}
		if got := log.warningEvents()[0].String(); !strings.Contains(got, "warning=replicas: replicas without the durable option") {
			t.Fatalf("event reads %q, want the warning in it", got)
		}

		// A keep-alive reports nothing new; a new session warns again.
		time.Sleep(3 * testConfig().RenewInterval)
		synctest.Wait()
		check(log.warningEvents(), first)
		srv.ExpireSession(first)
		for c.Snapshot().Session.ID == first || c.Snapshot().Session.ID == "" {
			time.Sleep(testConfig().RenewInterval)
			synctest.Wait()
		}
		evs := log.warningEvents()
		if len(evs) != 4 {
			t.Fatalf("%d warning events after a second session, want 4: %v", len(evs), evs)
		}
		check(evs[2:], c.Snapshot().Session.ID)
	})
}
