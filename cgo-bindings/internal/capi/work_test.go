package capi

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

func TestReasonName(t *testing.T) {
	for r := simba.NotRevoked; r <= simba.TakenOver; r++ {
		if got := ReasonName(int32(r)); got != r.String() {
			t.Errorf("ReasonName(%d) = %s, want %s", r, got, r)
		}
	}
	for _, r := range []int32{-1, 6, 1 << 30} {
		if got := ReasonName(r); got != "REASON_UNKNOWN" {
			t.Errorf("ReasonName(%d) = %s", r, got)
		}
	}
}

// TestHolder: any client sees who holds a lease, with the holder's
// identity and token, and nobody once it is released.
func TestHolder(t *testing.T) {
	url := storeURL()
	a, err := OpenClient(url, Options{LeaseMS: 3000, Identity: "node-a"})
	wantStatus(t, "open a", err, OK)
	defer func() { _ = CloseClient(a, 5000, 0) }()
	b := open(t, url)
	_, ok, err := Holder(b, "job", 5000, 0)
	wantStatus(t, "holder of a free lease", err, OK)
	if ok {
		t.Fatal("a free lease has a holder")
	}
	term, err := Acquire(a, "job", 5000, 0, false)
	wantStatus(t, "acquire", err, OK)
	token, _ := Token(term)
	for _, c := range []uint64{a, b} {
		h, ok, err := Holder(c, "job", NoTimeout, 0)
		wantStatus(t, "holder", err, OK)
		if !ok || h.Identity != "node-a" || h.Token != token || h.Session == "" {
			t.Fatalf("holder seen by client %d: %+v, %v; want node-a under token %d", c, h, ok, token)
		}
	}
	wantStatus(t, "release", Release(term, 5000), OK)
	wantStatus(t, "free", FreeTerm(term), OK)
	_, ok, err = Holder(b, "job", 5000, 0)
	wantStatus(t, "holder after the release", err, OK)
	if ok {
		t.Fatal("a released lease has a holder")
	}
	cancel := NewCancel()
	wantStatus(t, "cancel", Cancel(cancel), OK)
	_, _, err = Holder(b, "job", NoTimeout, cancel)
	wantStatus(t, "holder with a cancelled handle", err, Cancelled)
	wantStatus(t, "free cancel", FreeCancel(cancel), OK)
}

// collect reads events of the stream until want kinds came in order
// (others skipped), within 10s.
func collect(t *testing.T, stream uint64, want ...simba.EventKind) []simba.Event {
	t.Helper()
	var got []simba.Event
	deadline := time.Now().Add(10 * time.Second)
	for len(want) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no %v within 10s; got %v", want[0], got)
		}
		e, err := NextEvent(stream, 100)
		if StatusOf(err) == Timeout {
			continue
		}
		wantStatus(t, "next event", err, OK)
		if e.Kind == want[0] {
			got = append(got, e)
			want = want[1:]
		}
	}
	return got
}

// TestEvents: a stream gets the events of its client in order, then the
// last ones of the close, then the end; its handle outlives the client.
func TestEvents(t *testing.T) {
	c, err := OpenClient(storeURL(), Options{LeaseMS: 3000})
	wantStatus(t, "open", err, OK)
	s, err := SubscribeEvents(c, 0)
	wantStatus(t, "subscribe", err, OK)
	_, err = NextEvent(s, 0)
	if st := StatusOf(err); st != OK && st != Timeout {
		t.Fatalf("next of timeout 0: %v", err)
	}
	term, err := Acquire(c, "job", 5000, 0, false)
	wantStatus(t, "acquire", err, OK)
	wantStatus(t, "free", FreeTerm(term), OK)
	got := collect(t, s, simba.EventElected, simba.EventRevoked)
	if e := got[0]; e.Name != "job" || e.Token != 1 || !e.Lock || e.Session == "" || e.Time.IsZero() {
		t.Errorf("elected %+v", e)
	}
	if e := got[1]; e.Name != "job" || e.Reason != simba.Stopped {
		t.Errorf("revoked %+v", e)
	}
	start := time.Now()
	_, err = NextEvent(s, 50)
	if st := StatusOf(err); st == Timeout && time.Since(start) < 40*time.Millisecond {
		t.Errorf("a wait of 50ms timed out after %v", time.Since(start))
	}
	wantStatus(t, "close", CloseClient(c, 5000, 0), OK)
	collect(t, s, simba.EventSessionClosed)
	for {
		_, err = NextEvent(s, NoTimeout)
		if err != nil {
			break
		}
	}
	wantStatus(t, "next after the close's events", err, Closed)
	n, err := EventsDropped(s)
	wantStatus(t, "dropped", err, OK)
	if n != 0 {
		t.Errorf("dropped %d events of a reader that kept up", n)
	}
	wantStatus(t, "free", FreeEvents(s), OK)
	wantStatus(t, "free again", FreeEvents(s), BadHandle)
	_, err = NextEvent(s, 0)
	wantStatus(t, "next of a freed stream", err, BadHandle)
	noHandles(t)
}

// TestEventsDropOldest: a reader that does not read never slows the
// engine; its stream keeps the newest events, and the reader hears of
// the drops, with their count, before the next event.
func TestEventsDropOldest(t *testing.T) {
	c := open(t, storeURL())
	s, err := SubscribeEvents(c, 4)
	wantStatus(t, "subscribe", err, OK)
	defer func() { _ = FreeEvents(s) }()
	const cycles = 200
	start := time.Now()
	for range cycles {
		term, err := Acquire(c, "job", 5000, 0, false)
		wantStatus(t, "acquire", err, OK)
		wantStatus(t, "free", FreeTerm(term), OK)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("%d lock cycles took %v with a stream nobody reads", cycles, took)
	}
	// The reader comes back: it hears of the drops, then gets the newest
	// events, the last Revoked among them.
	var last simba.Event
	reported := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		e, err := NextEvent(s, 200)
		if StatusOf(err) == Timeout {
			if last.Kind == simba.EventRevoked && last.Token == cycles {
				break
			}
			continue
		}
		wantStatus(t, "next", err, OK)
		switch e.Kind {
		case simba.EventDropped:
			if e.Dropped <= 0 {
				t.Fatalf("EventDropped of %d", e.Dropped)
			}
			reported += e.Dropped
		case simba.EventKeepAlive:
		default:
			last = e
		}
	}
	total, err := EventsDropped(s)
	wantStatus(t, "dropped", err, OK)
	if total < cycles || uint64(reported) != total {
		t.Errorf("dropped %d events (%d reported to the reader) of %d, with a capacity of 4", total, reported, 2*cycles)
	}
	if last.Kind != simba.EventRevoked || last.Token != cycles {
		t.Errorf("the newest event kept is %v, want the Revoked of token %d", last, cycles)
	}
}

// TestEventsFreeWakesReader: freeing a stream ends a wait on it at once.
func TestEventsFreeWakesReader(t *testing.T) {
	c := open(t, storeURL())
	s, err := SubscribeEvents(c, 1)
	wantStatus(t, "subscribe", err, OK)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			for {
				e, err := NextEvent(s, NoTimeout)
				if err != nil || e.Kind == simba.EventDropped && e.Dropped == 0 {
					done <- err
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	wantStatus(t, "free", FreeEvents(s), OK)
	for range 2 {
		select {
		case err := <-done:
			wantStatus(t, "next while freed", err, BadHandle)
		case <-time.After(5 * time.Second):
			t.Fatal("a reader still waits on a freed stream")
		}
	}
}

// workRecorder is a Work that counts its calls and returns what ret
// gives.
type workRecorder struct {
	calls atomic.Int32
	ret   func(partition int, term, token, cb uint64) Status
}

func (w *workRecorder) work(partition int, term, token, cb uint64) Status {
	w.calls.Add(1)
	return w.ret(partition, term, token, cb)
}

func TestRunWhileLeader(t *testing.T) {
	url := storeURL()
	c := open(t, url)
	var valid atomic.Bool
	w := &workRecorder{ret: func(_ int, term, token, _ uint64) Status {
		v, err := Valid(term)
		valid.Store(err == nil && v && token > 0)
		return OK
	}}
	wantStatus(t, "work that is done", RunWhileLeader(c, "leader", NoTimeout, 0, w.work), OK)
	if w.calls.Load() != 1 || !valid.Load() {
		t.Fatalf("work ran %d times, valid term %v", w.calls.Load(), valid.Load())
	}
	failing := func(_ int, term, _, _ uint64) Status { return StatusOf(EnsureValid(term, 3600_000)) }
	wantStatus(t, "work that fails", RunWhileLeader(c, "leader", NoTimeout, 0, failing), TermExpired)
	unknown := func(_ int, _, _, _ uint64) Status { return 1000 }
	err := RunWhileLeader(c, "leader", NoTimeout, 0, unknown)
	wantStatus(t, "work that returns an unknown status", err, Backend)
	if !strings.Contains(err.Error(), "SIMBA_STATUS(1000)") {
		t.Errorf("message %q does not name the status", err)
	}

	// Work that waits for its term's end, until the call's timeout.
	var ended atomic.Bool
	waits := func(_ int, term, _, _ uint64) Status {
		err := WaitEnd(term, NoTimeout)
		ended.Store(err == nil)
		return StatusOf(err)
	}
	start := time.Now()
	wantStatus(t, "run until the timeout", RunWhileLeader(c, "leader", 200, 0, waits), OK)
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("a run of 200ms returned after %v", took)
	}
	if !ended.Load() {
		t.Error("the work's term did not end before the run returned")
	}
	// The lease is free at once: another client wins it.
	other := open(t, url)
	term, err := Acquire(other, "leader", 0, 0, false)
	wantStatus(t, "acquire after the run", err, OK)
	wantStatus(t, "free", FreeTerm(term), OK)

	cancel := NewCancel()
	done := make(chan error, 1)
	go func() { done <- RunWhileLeader(c, "leader", NoTimeout, cancel, waits) }()
	time.Sleep(100 * time.Millisecond)
	wantStatus(t, "cancel", Cancel(cancel), OK)
	select {
	case err := <-done:
		wantStatus(t, "cancelled run", err, OK)
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled run did not return")
	}
	wantStatus(t, "free cancel", FreeCancel(cancel), OK)

	// Closing the client from the work does not wait for the work.
	closer, err := OpenClient(url, Options{LeaseMS: 3000})
	wantStatus(t, "open", err, OK)
	closes := func(_ int, term, _, cb uint64) Status {
		if err := CloseClient(closer, 5000, cb); err != nil {
			return StatusOf(err)
		}
		return StatusOf(WaitEnd(term, 5000))
	}
	wantStatus(t, "run closed from its work", RunWhileLeader(closer, "leader", NoTimeout, 0, closes), Closed)
}

func TestRunWhileLeaderRefusesAStartedName(t *testing.T) {
	c := open(t, storeURL())
	r := &recorder{events: make(chan string, 16)}
	el, err := StartElection(c, "leader", r)
	wantStatus(t, "start", err, OK)
	never := func(int, uint64, uint64, uint64) Status { t.Error("work ran"); return OK }
	wantStatus(t, "run of a started election", RunWhileLeader(c, "leader", 100, 0, never), AlreadyStarted)
	term, err := Acquire(c, "job", 5000, 0, false)
	wantStatus(t, "acquire", err, OK)
	wantStatus(t, "run of a lock's name", RunWhileLeader(c, "job", 100, 0, never), NameInUse)
	wantStatus(t, "free", FreeTerm(term), OK)
	wantStatus(t, "stop", StopElection(el, 5000, 0), OK)
}

// TestGroupRun: two nodes split four partitions, two each, and a
// partition never has two holders at once.
func TestGroupRun(t *testing.T) {
	url := storeURL()
	var mu sync.Mutex
	holders := map[int]uint64{} // partition -> client
	overlap := false
	counts := func() map[uint64]int {
		mu.Lock()
		defer mu.Unlock()
		m := map[uint64]int{}
		for _, c := range holders {
			m[c]++
		}
		return m
	}
	work := func(client uint64) Work {
		return func(p int, term, _, _ uint64) Status {
			mu.Lock()
			if _, held := holders[p]; held {
				overlap = true
			}
			holders[p] = client
			mu.Unlock()
			err := WaitEnd(term, NoTimeout)
			mu.Lock()
			delete(holders, p)
			mu.Unlock()
			return StatusOf(err)
		}
	}
	a, err := OpenClient(url, Options{LeaseMS: 900})
	wantStatus(t, "open a", err, OK)
	b, err := OpenClient(url, Options{LeaseMS: 900})
	wantStatus(t, "open b", err, OK)
	defer func() { _ = CloseClient(a, 5000, 0) }()
	defer func() { _ = CloseClient(b, 5000, 0) }()
	cancel := NewCancel()
	defer func() { _ = FreeCancel(cancel) }()
	done := make(chan error, 2)
	go func() { done <- GroupRun(a, "grp", 4, NoTimeout, cancel, work(a)) }()
	deadline := time.Now().Add(10 * time.Second)
	for counts()[a] != 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := counts(); got[a] != 4 {
		t.Fatalf("one node holds %v of 4 partitions", got)
	}
	go func() { done <- GroupRun(b, "grp", 4, NoTimeout, cancel, work(b)) }()
	for got := counts(); (got[a] != 2 || got[b] != 2) && time.Now().Before(deadline); got = counts() {
		time.Sleep(20 * time.Millisecond)
	}
	if got := counts(); got[a] != 2 || got[b] != 2 {
		t.Fatalf("two nodes hold %v of 4 partitions, want 2 each", got)
	}
	wantStatus(t, "cancel", Cancel(cancel), OK)
	for range 2 {
		wantStatus(t, "group run", <-done, OK)
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Error("a partition had two holders at once")
	}
	if len(holders) != 0 {
		t.Errorf("works still run after the group returned: %v", holders)
	}
}

// TestGroupRunFailure: a partition's failing work ends the group with its
// status.
func TestGroupRunFailure(t *testing.T) {
	c := open(t, storeURL())
	fails := func(p int, _, _, _ uint64) Status {
		if p == 1 {
			return LockHeld
		}
		return OK
	}
	wantStatus(t, "group with a failing partition", GroupRun(c, "grp", 2, 10_000, 0, fails), LockHeld)
}

// TestEngineBadInputs: every bad argument of the holder, event, work and
// group calls is refused with its status, and no handle is left behind.
func TestEngineBadInputs(t *testing.T) {
	c := open(t, storeURL())
	term, err := Acquire(c, "held", 5000, 0, false)
	wantStatus(t, "acquire", err, OK)
	s, err := SubscribeEvents(c, 1)
	wantStatus(t, "subscribe", err, OK)
	ok := func(int, uint64, uint64, uint64) Status { return OK }
	tests := []struct {
		give string
		call func() error
		want Status
	}{
		{"holder of client 0", func() error { _, _, err := Holder(0, "x", 0, 0); return err }, BadHandle},
		{"holder of a term", func() error { _, _, err := Holder(term, "x", 0, 0); return err }, BadHandle},
		{"holder of a bad name", func() error { _, _, err := Holder(c, "a/b", 0, 0); return err }, InvalidName},
		{"holder with a negative timeout", func() error { _, _, err := Holder(c, "x", -2, 0); return err }, InvalidArgument},
		{"holder with a term as cancel", func() error { _, _, err := Holder(c, "x", 0, term); return err }, BadHandle},
		{"wait end of a client", func() error { return WaitEnd(c, 0) }, BadHandle},
		{"wait end with a negative timeout", func() error { return WaitEnd(term, -2) }, InvalidArgument},
		{"wait end of a lasting term", func() error { return WaitEnd(term, 0) }, Timeout},
		{"subscribe on a term", func() error { _, err := SubscribeEvents(term, 0); return err }, BadHandle},
		{"negative capacity", func() error { _, err := SubscribeEvents(c, -1); return err }, InvalidArgument},
		{"huge capacity", func() error { _, err := SubscribeEvents(c, MaxEventCapacity+1); return err }, InvalidArgument},
		{"next of a client", func() error { _, err := NextEvent(c, 0); return err }, BadHandle},
		{"next with a negative timeout", func() error { _, err := NextEvent(s, -5); return err }, InvalidArgument},
		{"dropped of a term", func() error { _, err := EventsDropped(term); return err }, BadHandle},
		{"free a client as events", func() error { return FreeEvents(c) }, BadHandle},
		{"events as term", func() error { _, err := Token(s); return err }, BadHandle},
		{"run on handle 0", func() error { return RunWhileLeader(0, "x", 0, 0, ok) }, BadHandle},
		{"run without work", func() error { return RunWhileLeader(c, "x", 0, 0, nil) }, InvalidArgument},
		{"run of a bad name", func() error { return RunWhileLeader(c, "..", 0, 0, ok) }, InvalidName},
		{"run with a negative timeout", func() error { return RunWhileLeader(c, "x", -2, 0, ok) }, InvalidArgument},
		{"run with events as cancel", func() error { return RunWhileLeader(c, "x", 0, s, ok) }, BadHandle},
		{"group of 0 partitions", func() error { return GroupRun(c, "g", 0, 0, 0, ok) }, InvalidArgument},
		{"group of too many partitions", func() error { return GroupRun(c, "g", simba.MaxPartitions+1, 0, 0, ok) }, InvalidArgument},
		{"group whose partition names are too long", func() error { return GroupRun(c, strings.Repeat("g", 127), 10, 0, 0, ok) }, InvalidName},
		{"group without work", func() error { return GroupRun(c, "g", 2, 0, 0, nil) }, InvalidArgument},
		{"group of a bad name", func() error { return GroupRun(c, "g/h", 2, 0, 0, ok) }, InvalidName},
		{"group on a term", func() error { return GroupRun(term, "g", 2, 0, 0, ok) }, BadHandle},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			wantStatus(t, tt.give, tt.call(), tt.want)
		})
	}
	wantStatus(t, "free events", FreeEvents(s), OK)
	wantStatus(t, "free", FreeTerm(term), OK)
	wantStatus(t, "close", CloseClient(c, 5000, 0), OK)
	noHandles(t)
}

// TestWorkTermOutlivesTheClose: a close of the client from another thread
// ends the work's term, and the work's handle of it stays valid until the
// work returned: the work reads that the term ended, not a bad handle.
func TestWorkTermOutlivesTheClose(t *testing.T) {
	c, err := OpenClient(storeURL(), Options{LeaseMS: 900})
	wantStatus(t, "open", err, OK)
	started, closed := make(chan struct{}), make(chan struct{})
	seen := make(chan error, 1)
	work := func(_ int, term, _, _ uint64) Status {
		close(started)
		<-closed
		v, err := Valid(term)
		if err == nil && v {
			err = errors.New("the term is valid after the close")
		}
		seen <- err
		return OK
	}
	done := make(chan error, 1)
	go func() { done <- RunWhileLeader(c, "leader", NoTimeout, 0, work) }()
	<-started
	// The close waits for the work up to the term's deadline, then ends.
	wantStatus(t, "close", CloseClient(c, NoTimeout, 0), OK)
	close(closed)
	if err := <-seen; err != nil {
		t.Fatalf("the work's term after the close: %v", err)
	}
	wantStatus(t, "run of a closed client", <-done, Closed)
	noHandles(t)
}

// TestStreamCountsTheEngineDrops: an EventDropped of the engine's own
// queue reaches the reader, and when the stream drops it in turn its
// count goes into the stream's next EventDropped: the counts the reader
// gets add up to EventsDropped.
func TestStreamCountsTheEngineDrops(t *testing.T) {
	s := &eventStream{capacity: 2, wake: make(chan struct{}, 1)}
	at := time.Now()
	s.push(simba.Event{Kind: simba.EventDropped, Dropped: 5, Time: at})
	s.push(simba.Event{Kind: simba.EventElected, Token: 1, Time: at})
	s.push(simba.Event{Kind: simba.EventRevoked, Token: 1, Time: at}) // drops the engine's EventDropped
	s.push(simba.Event{Kind: simba.EventElected, Token: 2, Time: at}) // drops Elected 1
	var got []string
	reported := 0
	for {
		e, ok, err := s.pop()
		if err != nil || !ok {
			break
		}
		reported += e.Dropped
		got = append(got, fmt.Sprintf("%v %d %d", e.Kind, e.Token, e.Dropped))
	}
	want := []string{"Dropped 0 6", "Revoked 1 0", "Elected 2 0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if s.total != 6 || reported != 6 {
		t.Fatalf("EventsDropped %d, reported %d, want 6", s.total, reported)
	}
}
