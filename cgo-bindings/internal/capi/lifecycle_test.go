package capi

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestStopTimeoutThenRelease: a stop that times out while a callback
// blocks returns at its timeout; the stop completes when the callback
// returns, and the release comes last.
func TestStopTimeoutThenRelease(t *testing.T) {
	c := open(t, storeURL())
	unblock := make(chan struct{})
	r := &recorder{events: make(chan string, 16), onElect: func(_, _, _ uint64) { <-unblock }}
	el, err := StartElection(c, "leader", r)
	wantStatus(t, "start", err, OK)
	next(t, r.events, "elected 1")
	start := time.Now()
	wantStatus(t, "stop while on_elected blocks", StopElection(el, 50, 0), Timeout)
	if took := time.Since(start); took > time.Second {
		t.Errorf("stop(50ms) took %v", took)
	}
	select {
	case e := <-r.events:
		t.Fatalf("%s while on_elected still runs", e)
	case <-time.After(100 * time.Millisecond):
	}
	close(unblock)
	next(t, r.events, "revoked 1 STOPPED")
	next(t, r.events, "released")
}

// TestCloseTimeoutThenRelease: the same for a close; the client's handle
// is gone at once, its other handles once the close ended.
func TestCloseTimeoutThenRelease(t *testing.T) {
	c, err := OpenClient(storeURL(), Options{LeaseMS: 3000})
	wantStatus(t, "open", err, OK)
	unblock := make(chan struct{})
	r := &recorder{events: make(chan string, 16), onElect: func(_, _, _ uint64) { <-unblock }}
	_, err = StartElection(c, "leader", r)
	wantStatus(t, "start", err, OK)
	next(t, r.events, "elected 1")
	wantStatus(t, "close while on_elected blocks", CloseClient(c, 50, 0), Timeout)
	_, err = Acquire(c, "job", 0, 0, false)
	wantStatus(t, "acquire on the closed client", err, BadHandle)
	close(unblock)
	next(t, r.events, "revoked 1 STOPPED")
	next(t, r.events, "released")
	deadline := time.Now().Add(5 * time.Second)
	for HandleCounts().Total() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	noHandles(t)
}

// TestAcquireTimeoutBounds: a timeout of 0 makes one attempt (the
// engine's Acquire with an expired ctx would not try at all), and the
// largest timeouts wait the maximum instead of being refused.
func TestAcquireTimeoutBounds(t *testing.T) {
	url := storeURL()
	a, b := open(t, url), open(t, url)
	term, err := Acquire(a, "job", 0, 0, false)
	wantStatus(t, "acquire(0) of a free lock", err, OK)
	_, err = Acquire(b, "job", 0, 0, false)
	wantStatus(t, "acquire(0) of a held lock", err, LockTimeout)
	wantStatus(t, "release(max)", Release(term, math.MaxInt64), OK)
	wantStatus(t, "free", FreeTerm(term), OK)
	term, err = Acquire(b, "job", math.MaxInt64, 0, false)
	wantStatus(t, "acquire(max)", err, OK)
	wantStatus(t, "free", FreeTerm(term), OK)
	term, err = Acquire(b, "job", math.MaxInt64, 0, true)
	wantStatus(t, "try_acquire(max)", err, OK)
	wantStatus(t, "free", FreeTerm(term), OK)
	_, err = Acquire(b, "job", -2, 0, false)
	wantStatus(t, "acquire(-2)", err, InvalidArgument)
	_, err = OpenClient(url, Options{LeaseMS: math.MaxInt64})
	wantStatus(t, "a lease of max ms", err, InvalidArgument)
}

// TestAwaitEndOfZeroReportsWorkDone: a timeout of 0 does not wait, and a
// close or stop already done then is SIMBA_OK, not a timeout (both
// channels are ready at once; the outcome must win every time).
func TestAwaitEndOfZeroReportsWorkDone(t *testing.T) {
	for i := range 200 {
		wait, stop, err := waitContext(context.Background(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		done <- nil
		<-wait.Done()
		if err := awaitEnd(wait, done, "stop election", 0); err != nil {
			stop()
			t.Fatalf("run %d: awaitEnd of finished work with a timeout of 0 = %v, want nil", i, err)
		}
		stop()
	}
	wait, stop, err := waitContext(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	wantStatus(t, "awaitEnd of unfinished work", awaitEnd(wait, make(chan error), "stop election", 0), Timeout)
}

// TestStopAndCloseOfZero: a stop and a close with a timeout of 0 return
// at once, SIMBA_OK or SIMBA_ERR_TIMEOUT, and the work ends either way.
func TestStopAndCloseOfZero(t *testing.T) {
	c := open(t, storeURL())
	r := &recorder{events: make(chan string, 16)}
	el, err := StartElection(c, "zero-stop", r)
	wantStatus(t, "start", err, OK)
	next(t, r.events, "elected 1")
	start := time.Now()
	if st := StatusOf(StopElection(el, 0, 0)); st != OK && st != Timeout {
		t.Fatalf("stop(0): status %v", st)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("stop(0) took %v", took)
	}
	next(t, r.events, "revoked 1 STOPPED")
	next(t, r.events, "released")
	if st := StatusOf(CloseClient(c, 0, 0)); st != OK && st != Timeout {
		t.Fatalf("close(0): status %v", st)
	}
}

// TestCloseFromElectedKeepsTheTerm: a close of the client from on_elected
// does not free the handle of the term whose callbacks still run: it is
// valid in on_elected after the close and in its on_revoked.
func TestCloseFromElectedKeepsTheTerm(t *testing.T) {
	c, err := OpenClient(storeURL(), Options{LeaseMS: 3000})
	wantStatus(t, "open", err, OK)
	errs := make(chan error, 3)
	r := &recorder{events: make(chan string, 16)}
	r.onElect = func(_, term, cb uint64) {
		errs <- CloseClient(c, 5000, cb)
		_, err := Token(term)
		errs <- err
	}
	r.revokeCB = func(_, term, _ uint64) {
		_, err := Token(term)
		errs <- err
	}
	_, err = StartElection(c, "leader", r)
	wantStatus(t, "start", err, OK)
	next(t, r.events, "elected 1")
	wantStatus(t, "close from on_elected", <-errs, OK)
	wantStatus(t, "token in on_elected after the close", <-errs, OK)
	next(t, r.events, "revoked 1 STOPPED")
	wantStatus(t, "token in on_revoked", <-errs, OK)
	next(t, r.events, "released")
	deadline := time.Now().Add(5 * time.Second)
	for HandleCounts().Total() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	noHandles(t)
}

// TestCloseWaitsForATimedOutStop: after a stop that timed out while
// on_elected blocks, a close of the client returns SIMBA_OK only after
// that on_elected, its on_revoked and the release: the release is the
// moment the caller may free what the callbacks use.
func TestCloseWaitsForATimedOutStop(t *testing.T) {
	c, err := OpenClient(storeURL(), Options{LeaseMS: 3000})
	wantStatus(t, "open", err, OK)
	unblock := make(chan struct{})
	r := &recorder{events: make(chan string, 16), onElect: func(_, _, _ uint64) { <-unblock }}
	el, err := StartElection(c, "leader", r)
	wantStatus(t, "start", err, OK)
	next(t, r.events, "elected 1")
	wantStatus(t, "stop while on_elected blocks", StopElection(el, 50, 0), Timeout)
	closed := make(chan error, 1)
	go func() { closed <- CloseClient(c, 5000, 0) }()
	select {
	case err := <-closed:
		t.Fatalf("close returned %v while on_elected of the stopped election still runs", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(unblock)
	wantStatus(t, "close", <-closed, OK)
	for _, want := range []string{"revoked 1 STOPPED", "released"} {
		select {
		case got := <-r.events:
			if got != want {
				t.Fatalf("callback %q, want %q", got, want)
			}
		default:
			t.Fatalf("the close returned before %q", want)
		}
	}
	noHandles(t)
}
