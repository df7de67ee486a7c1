package simba_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

var errOutage = errors.New("connection refused")

// outage is a way for a node's connection to the backend to break.
type outage struct {
	name string
	// live: the session is opened before the fault starts.
	live  bool
	fault func(*memory.Conn)
}

var outages = []outage{
	{"every call fails from the start", false, func(c *memory.Conn) { c.Fail(errOutage) }},
	{"stalled from the start", false, (*memory.Conn).Stall},
	{"every call fails once live", true, func(c *memory.Conn) { c.Fail(errOutage) }},
	{"stalled once live", true, (*memory.Conn).Stall},
	{"replies lost once live", true, func(c *memory.Conn) { c.DropReplies(true) }},
}

// brokenClient returns a client whose connection o breaks.
func brokenClient(t *testing.T, o outage) *simba.Client {
	t.Helper()
	conn := memory.New().Connect()
	if !o.live {
		o.fault(conn)
	}
	c := newClient(t, conn)
	if o.live {
		synctest.Wait()
		if st := c.Snapshot().Session.Status; st != simba.StatusLive {
			t.Fatalf("session %v before the outage, want LIVE", st)
		}
		o.fault(conn)
	}
	return c
}

// checkErr fails the test unless err matches every sentinel of want and
// none of notWant.
func checkErr(t *testing.T, err error, want, notWant []error) {
	t.Helper()
	for _, w := range want {
		if !errors.Is(err, w) {
			t.Errorf("error %v does not match %v", err, w)
		}
	}
	for _, w := range notWant {
		if errors.Is(err, w) {
			t.Errorf("error %v matches %v", err, w)
		}
	}
}

// TryAcquire on a node that cannot reach its backend waits one lease
// duration (3s) and reports the outage, never ErrLockHeld.
func TestTryAcquireBackendUnavailable(t *testing.T) {
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := brokenClient(t, o)
				start := time.Now()
				lt, err := c.Lock("x").TryAcquire(context.Background())
				if lt != nil {
					t.Fatalf("won %v on a broken backend", lt.Term)
				}
				checkErr(t, err, []error{simba.ErrBackendUnavailable, simba.ErrLockTimeout}, []error{simba.ErrLockHeld})
				if d := time.Since(start); d != 3*time.Second {
					t.Errorf("gave up after %v, want one lease duration", d)
				}
			})
		})
	}
}

// Acquire on a node that cannot reach its backend times out at its
// deadline with an error that also reports the outage.
func TestAcquireBackendUnavailable(t *testing.T) {
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := brokenClient(t, o)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				start := time.Now()
				_, err := c.Lock("x").Acquire(ctx)
				checkErr(t, err, []error{simba.ErrBackendUnavailable, simba.ErrLockTimeout, context.DeadlineExceeded}, []error{simba.ErrLockHeld})
				if d := time.Since(start); d != 5*time.Second {
					t.Errorf("gave up after %v, want the 5s deadline", d)
				}
			})
		})
	}
}

// A healthy backend on which the lease is held is contention, not an
// outage: ErrLockHeld and ErrLockTimeout come without ErrBackendUnavailable.
func TestLockContendedIsNotUnavailable(t *testing.T) {
	tests := []struct {
		give    string
		holder  string // "other": another client holds x; "self": this client does
		try     bool
		want    []error
		wantDur time.Duration
	}{
		{give: "TryAcquire held by another session", holder: "other", try: true,
			want: []error{simba.ErrLockHeld}},
		{give: "TryAcquire held by this client", holder: "self", try: true,
			want: []error{simba.ErrLockHeld}},
		{give: "Acquire held by another session", holder: "other",
			want: []error{simba.ErrLockTimeout, context.DeadlineExceeded}, wantDur: 5 * time.Second},
		{give: "Acquire held by this client", holder: "self",
			want: []error{simba.ErrLockTimeout, context.DeadlineExceeded}, wantDur: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := memory.New()
				c := newClient(t, s.Connect())
				holder := c
				if tt.holder == "other" {
					holder = newClient(t, s.Connect())
				}
				lt, err := holder.Lock("x").Acquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = lt.Close() }()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				start := time.Now()
				if tt.try {
					_, err = c.Lock("x").TryAcquire(ctx)
				} else {
					_, err = c.Lock("x").Acquire(ctx)
				}
				notWant := []error{simba.ErrBackendUnavailable, simba.ErrLockHeld}
				if tt.try {
					notWant = []error{simba.ErrBackendUnavailable, simba.ErrLockTimeout}
				}
				checkErr(t, err, tt.want, notWant)
				if d := time.Since(start); d != tt.wantDur {
					t.Errorf("returned after %v, want %v", d, tt.wantDur)
				}
			})
		})
	}
}

// failingAcquires is a backend whose sessions work but whose acquire
// calls all fail.
type failingAcquires struct{ *memory.Conn }

func (failingAcquires) Acquire(context.Context, simba.SessionID, string) (simba.AcquireResult, error) {
	return simba.AcquireResult{}, errOutage
}

// A live session whose every attempt fails is an outage too, and the
// error says why.
func TestEveryAttemptFailedIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, failingAcquires{memory.New().Connect()})
		_, err := c.Lock("x").TryAcquire(context.Background())
		checkErr(t, err, []error{simba.ErrBackendUnavailable, simba.ErrLockTimeout}, []error{simba.ErrLockHeld})
		if st := c.Snapshot().Session.Status; st != simba.StatusLive {
			t.Errorf("session %v, want LIVE", st)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = c.Lock("x").Acquire(ctx)
		checkErr(t, err, []error{simba.ErrBackendUnavailable, simba.ErrLockTimeout, context.DeadlineExceeded}, nil)
		if want := "connection refused"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not give the last attempt's error %q", err, want)
		}
	})
}

// Cancelling an Acquire during an outage is the caller's decision, not a
// timeout of the backend's making: context.Canceled, no ErrBackendUnavailable.
func TestCancelDuringOutageIsNotUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := brokenClient(t, outages[0])
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		_, err := c.Lock("x").Acquire(ctx)
		checkErr(t, err, []error{simba.ErrLockTimeout, context.Canceled}, []error{simba.ErrBackendUnavailable})
	})
}

// A failed attempt is made again within TryAcquire's wait: a connection
// that heals before the wait ends gets the lock.
func TestTryAcquireRetriesAFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		conn := s.Connect()
		c := newClient(t, conn)
		synctest.Wait()
		conn.Fail(errOutage)
		time.AfterFunc(time.Second, conn.Heal)
		lt, err := c.Lock("x").TryAcquire(context.Background())
		if err != nil {
			t.Fatalf("TryAcquire across a 1s outage: %v", err)
		}
		defer func() { _ = lt.Close() }()
		if id, _, ok := s.Owner("x"); !ok || id != lt.Session() {
			t.Errorf("store owner %q, want the term's session %q", id, lt.Session())
		}
	})
}

// A TryAcquire behind an Acquire of the same client waits for the answer
// to the queue's attempt: ErrLockHeld when another session holds the lease,
// ErrBackendUnavailable when the backend cannot be asked.
func TestTryAcquireBehindAWaitingAcquire(t *testing.T) {
	for _, outage := range []bool{false, true} {
		name := map[bool]string{false: "contended", true: "outage"}[outage]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := memory.New()
				conn := s.Connect()
				c := newClient(t, conn)
				other := newClient(t, s.Connect())
				lt, err := other.Lock("x").Acquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = lt.Close() }()
				synctest.Wait()
				if outage {
					conn.Fail(errOutage)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				acquired := make(chan error, 1)
				go func() {
					_, err := c.Lock("x").Acquire(ctx)
					acquired <- err
				}()
				synctest.Wait()
				_, err = c.Lock("x").TryAcquire(context.Background())
				if outage {
					checkErr(t, err, []error{simba.ErrBackendUnavailable}, []error{simba.ErrLockHeld})
				} else {
					checkErr(t, err, []error{simba.ErrLockHeld}, []error{simba.ErrBackendUnavailable})
				}
				cancel()
				if err := <-acquired; !errors.Is(err, context.Canceled) {
					t.Errorf("cancelled Acquire: %v", err)
				}
			})
		})
	}
}

func ExampleLock_TryAcquire() {
	store := memory.New()
	conn := store.Connect()
	cfg := simba.Config{LeaseDuration: 300 * time.Millisecond}
	quiet := simba.WithLogger(slog.New(slog.DiscardHandler)) // the outage below ends a session: a warning
	client, _ := simba.New(conn, simba.WithConfig(cfg), quiet)
	defer client.Close(context.Background())
	other, _ := simba.New(store.Connect(), simba.WithConfig(cfg))
	defer other.Close(context.Background())

	try := func() {
		term, err := client.Lock("report").TryAcquire(context.Background())
		switch {
		case errors.Is(err, simba.ErrBackendUnavailable):
			fmt.Println("backend unavailable: try again later")
		case errors.Is(err, simba.ErrLockHeld):
			fmt.Println("held elsewhere")
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Println("running the report with token", term.Token())
			_ = term.Close()
		}
	}
	try()
	held, _ := other.Lock("report").Acquire(context.Background())
	try()
	_ = held.Close()
	conn.Fail(errors.New("connection refused"))
	try()
	// Output:
	// running the report with token 1
	// held elsewhere
	// backend unavailable: try again later
}
