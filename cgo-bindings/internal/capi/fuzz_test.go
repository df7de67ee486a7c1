package capi

import (
	"strings"
	"testing"

	simba "github.com/simba-go/simba/core"
)

// known reports whether s is a code of simba.h.
func known(s Status) bool { return s >= OK && s < Internal }

// FuzzOpenClient: any URL and settings give a client or a documented
// status, never a panic, and a failed open leaves no handle.
func FuzzOpenClient(f *testing.F) {
	f.Add("memory://a", int64(0), int64(0), "")
	f.Add("memory://", int64(3000), int64(1000), "node-1")
	f.Add("redis://:secret@[::1", int64(-1), int64(0), "x")
	f.Add("MEMORY://A/", int64(1), int64(1), "\xff")
	f.Add("://", int64(1<<62), int64(0), "")
	f.Fuzz(func(t *testing.T, url string, lease, renew int64, identity string) {
		before := HandleCounts()
		h, err := OpenClient(url, Options{LeaseMS: lease, RenewMS: renew, Identity: identity})
		st := StatusOf(err)
		if !known(st) {
			t.Fatalf("OpenClient(%q): status %v: %v", url, st, err)
		}
		if err != nil {
			if strings.Contains(url, ":secret@") && strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error quotes the password: %v", err)
			}
			if after := HandleCounts(); after != before {
				t.Fatalf("a failed open left handles: %+v, before %+v", after, before)
			}
			return
		}
		if err := CloseClient(h, 5000, 0); err != nil {
			t.Fatalf("close: %v", err)
		}
	})
}

// FuzzLockName: a name is accepted exactly when it is valid (R-NAME-1),
// and a refused name never reaches the backend nor leaves a handle.
func FuzzLockName(f *testing.F) {
	c, err := OpenClient("memory://fuzz-names", Options{LeaseMS: 3000})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = CloseClient(c, 5000, 0) })
	for _, s := range []string{"job", "", ".", "..", "a/b", "ü", "\xff", strings.Repeat("x", 128), strings.Repeat("x", 129), "a:b-c_d.e"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, name string, election bool) {
		var h uint64
		var err error
		if election {
			h, err = StartElection(c, name, &recorder{events: make(chan string, 16)})
		} else {
			h, err = Acquire(c, name, 0, 0, true)
		}
		valid := simba.ValidateName(name) == nil
		switch st := StatusOf(err); {
		case valid && st == OK:
			if election {
				err = StopElection(h, 5000, 0)
			} else {
				err = FreeTerm(h)
			}
			if err != nil {
				t.Fatalf("end %q: %v", name, err)
			}
		case valid && (st == LockHeld || st == NameInUse):
			// the name is in use on this client as the other kind
		case !valid && st == InvalidName:
		default:
			t.Fatalf("name %q (valid %v, election %v): status %v: %v", name, valid, election, st, err)
		}
	})
}

// FuzzHandles: any handle given to any call is either the right kind or
// refused with SIMBA_ERR_BAD_HANDLE (or a bad argument), never a panic.
func FuzzHandles(f *testing.F) {
	c, err := OpenClient("memory://fuzz-handles", Options{LeaseMS: 3000})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = CloseClient(c, 5000, 0) })
	f.Add(uint64(0), byte(0), int64(0))
	f.Add(c, byte(1), int64(-1))
	f.Add(c+1, byte(7), int64(10))
	f.Add(^uint64(0), byte(9), int64(1<<62))
	f.Fuzz(func(t *testing.T, h uint64, op byte, ms int64) {
		if h == c && op%12 == 11 {
			return // closing the shared client would end the other inputs' run
		}
		var err error
		switch op % 12 {
		case 0:
			_, err = Token(h)
		case 1:
			_, err = Valid(h)
		case 2:
			_, err = RemainingMS(h)
		case 3:
			err = EnsureValid(h, ms)
		case 4:
			err = Release(h, ms)
		case 5:
			_, err = Snapshot(h)
		case 6:
			err = Cancel(h)
		case 7:
			err = StepDown(h, ms, ms, 0)
		case 8:
			_, err = Reason(h)
		case 9:
			var term uint64
			term, err = Acquire(c, "fuzz", ms, h, true)
			if err == nil {
				if h != 0 { // 0 is "no cancel handle"
					t.Fatalf("acquire with the non-cancel handle %d succeeded", h)
				}
				err = FreeTerm(term)
			}
		case 10:
			err = StopElection(h, ms, 0)
		case 11:
			err = CloseClient(h, ms, 0)
		}
		switch st := StatusOf(err); st {
		case OK, BadHandle, InvalidArgument:
		default:
			if op%12 == 5 || op%12 == 9 {
				return // a snapshot or a try-acquire on the real client
			}
			t.Fatalf("op %d on handle %d: status %v: %v", op%12, h, st, err)
		}
	})
}

// FuzzEngineHandles: any handle and timeout given to the holder, event,
// term-wait, work and group calls is either the right kind or refused
// with SIMBA_ERR_BAD_HANDLE (or a bad argument), never a panic, and no
// call leaves a handle behind.
func FuzzEngineHandles(f *testing.F) {
	c, err := OpenClient("memory://fuzz-engine", Options{LeaseMS: 3000})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = CloseClient(c, 5000, 0) })
	f.Add(uint64(0), byte(0), int64(0))
	f.Add(c, byte(1), int64(-1))
	f.Add(c, byte(4), int64(3))
	f.Add(c+1, byte(5), int64(10))
	f.Add(^uint64(0), byte(6), int64(1<<62))
	done := func(int, uint64, uint64, uint64) Status { return OK }
	f.Fuzz(func(t *testing.T, h uint64, op byte, ms int64) {
		if ms > 20 {
			ms %= 20 // a wait on the real client stays short
		}
		before := HandleCounts()
		var err error
		switch op % 8 {
		case 0:
			_, _, err = Holder(h, "fuzz", ms, 0)
		case 1:
			_, _, err = Holder(c, "fuzz", ms, h)
		case 2:
			err = WaitEnd(h, ms)
		case 3:
			_, err = NextEvent(h, ms)
		case 4:
			var s uint64
			s, err = SubscribeEvents(h, ms)
			if err == nil {
				err = FreeEvents(s)
			}
		case 5:
			_, err = EventsDropped(h)
			if err == nil || StatusOf(err) == BadHandle {
				err = FreeEvents(h)
			}
		case 6:
			err = RunWhileLeader(h, "fuzz-run", ms, 0, done)
		case 7:
			err = GroupRun(h, "fuzz-group", ms, ms, 0, done)
		}
		switch st := StatusOf(err); st {
		case OK, BadHandle, InvalidArgument, Timeout:
		default:
			t.Fatalf("op %d on handle %d (%dms): status %v: %v", op%8, h, ms, st, err)
		}
		if after := HandleCounts(); after != before {
			t.Fatalf("op %d on handle %d left handles: %+v, before %+v", op%8, h, after, before)
		}
	})
}
