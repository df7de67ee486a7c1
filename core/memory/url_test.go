package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

func TestOpenSharesAStorePerName(t *testing.T) {
	ctx := t.Context()
	a1, err := memory.Open(ctx, "memory://open-test-a")
	if err != nil {
		t.Fatal(err)
	}
	a2, err := memory.Open(ctx, "MEMORY://open-test-a/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := memory.Open(ctx, "memory://open-test-b")
	if err != nil {
		t.Fatal(err)
	}
	if a1 == a2 || a1.Server() != a2.Server() {
		t.Errorf("two opens of one name: connections %p, %p on stores %p, %p; want two connections to one store",
			a1, a2, a1.Server(), a2.Server())
	}
	if b.Server() == a1.Server() {
		t.Error("two names share a store")
	}
	g, err := a1.OpenSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: time.Minute}); err != nil {
		t.Errorf("a session of one connection is unknown to the other: %v", err)
	}
	if _, err := b.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: time.Minute}); !errors.Is(err, simba.ErrSessionExpired) {
		t.Errorf("KeepAlive on another store = %v, want ErrSessionExpired", err)
	}
}

func TestOpenRefusesURLs(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{give: "memory:name", want: `memory: invalid URL: no "//" after "memory:": want memory://[NAME]`},
		{give: "name", want: "memory: invalid URL: no scheme: want memory://[NAME]"},
		{give: "redis://host", want: `scheme "redis": want memory://[NAME]`},
		{give: "memory://user:s3cr3t@name", want: "user information is not allowed"},
		{give: "memory://:s3cr3t@name", want: "user information is not allowed"},
		{give: "memory://name:1", want: "without port"},
		{give: "memory://name/path", want: "without port, path"},
		{give: "memory://name?x=s3cr3t", want: "query"},
		{give: "memory://name#s3cr3t", want: "fragment"},
		{give: "memory://na%zzme", want: "not a valid URL"},
		{give: "", want: "the URL is empty: want memory://[NAME]"},
		{give: "  ", want: "the URL is only spaces"},
		{give: " memory://x", want: "the URL starts or ends with a space"},
		{give: "REDIS://h", want: `scheme "redis": want memory://[NAME]`},
	}
	for _, tt := range tests {
		_, err := memory.Open(t.Context(), tt.give)
		if !errors.Is(err, simba.ErrInvalidURL) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want an ErrInvalidURL error saying %q", tt.give, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "name") {
			t.Errorf("Open(%q) = %q quotes the URL", tt.give, err)
		}
	}
}

func TestOpenWithDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := memory.Open(ctx, "memory://done"); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled ctx = %v, want context.Canceled", err)
	}
}

func TestOpenBackendRegistered(t *testing.T) {
	b, err := simba.OpenBackend(t.Context(), "memory://registry-test")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, ok := b.(*memory.Conn)
	if !ok {
		t.Fatalf("OpenBackend(memory://...) = %T, want *memory.Conn", b)
	}
	if c.Server() == nil {
		t.Fatal("no store")
	}
	if _, err := simba.OpenBackend(t.Context(), "memory://x/y"); !errors.Is(err, simba.ErrInvalidURL) {
		t.Errorf("OpenBackend of a bad memory URL = %v, want ErrInvalidURL", err)
	}
}

// TestCloseEndsWaits checks that Close returns at once and ends the calls
// waiting on a fault, even under contexts that never end.
func TestCloseEndsWaits(t *testing.T) {
	srv := memory.New()
	owner, node := srv.Connect(), srv.Connect()
	ctx := context.Background() // no deadline: only Close can end the waits
	g, err := owner.OpenSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Acquire(ctx, g.ID, "job"); err != nil {
		t.Fatal(err)
	}
	watch, err := node.WatchRelease(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	node.Stall()
	stalled := make(chan error, 1)
	go func() {
		_, err := node.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: time.Minute})
		stalled <- err
	}()
	dropped := srv.Connect()
	dropped.DropReplies(true)
	lost := make(chan error, 1)
	go func() {
		_, err := dropped.Acquire(ctx, g.ID, "job")
		lost <- err
	}()
	delayed := srv.Connect()
	delayed.Delay(time.Hour)
	late := make(chan error, 1)
	go func() {
		late <- delayed.Release(ctx, g.ID, "job", 1)
	}()

	start := time.Now()
	for _, c := range []*memory.Conn{node, dropped, delayed} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for what, ch := range map[string]chan error{"stalled": stalled, "lost reply": lost, "delayed": late} {
		select {
		case err := <-ch:
			if !errors.Is(err, memory.ErrClosed) {
				t.Errorf("%s call after Close = %v, want ErrClosed", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s call still waiting 5s after Close", what)
		}
	}
	select {
	case <-watch:
	default:
		t.Error("Close did not wake the connection's watch")
	}
	if srv.Watchers() != 0 {
		t.Errorf("%d watches left after Close", srv.Watchers())
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close and the waits it ended took %v", took)
	}
	if _, err := node.OpenSession(ctx, time.Minute); !errors.Is(err, memory.ErrClosed) {
		t.Errorf("OpenSession after Close = %v, want ErrClosed", err)
	}
	if _, err := node.WatchRelease(ctx, "job"); !errors.Is(err, memory.ErrClosed) {
		t.Errorf("WatchRelease after Close = %v, want ErrClosed", err)
	}
	if err := node.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, _, ok := srv.Owner("job"); !ok {
		t.Error("Close of other connections changed the store")
	}
}
