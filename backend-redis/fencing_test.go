package simbaredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log"
	"math"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/fencingtest"
)

func TestNewFenceRefuses(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = client.Close() })
	tests := []struct {
		name     string
		client   redis.Scripter
		resource string
		wantName bool // the error is also an invalid lease name
	}{
		{name: "nil client", client: nil, resource: "ledger"},
		{name: "empty", client: client, resource: "", wantName: true},
		{name: "hash tag", client: client, resource: "a}b{c", wantName: true},
		{name: "space", client: client, resource: "led ger", wantName: true},
		{name: "too long", client: client, resource: strings.Repeat("x", simba.MaxNameLength+1), wantName: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFence(tt.client, tt.resource)
			if !errors.Is(err, ErrInvalidFence) {
				t.Fatalf("NewFence(%q) = %v, %v; want an ErrInvalidFence", tt.resource, f, err)
			}
			if got := errors.Is(err, simba.ErrInvalidName); got != tt.wantName {
				t.Errorf("errors.Is(%v, simba.ErrInvalidName) = %t, want %t", err, got, tt.wantName)
			}
		})
	}
}

// fenceName returns a resource name no other test or run uses.
func fenceName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "simbatest-fence-" + hex.EncodeToString(b[:])
}

// newTestFence returns a fence with a fresh name on its own client, and
// deletes its keys when the test ends.
func newTestFence(t testing.TB, url string) (*Fence, *redis.Client, string) {
	t.Helper()
	name := fenceName()
	raw := rawClient(t, url)
	t.Cleanup(func() { raw.Del(context.Background(), "{"+name+"}:token", "{"+name+"}:value") })
	c := rawClient(t, url)
	f, err := NewFence(c, name)
	if err != nil {
		t.Fatalf("NewFence: %v", err)
	}
	return f, raw, name
}

// fenceResource adapts a Fence to the fencing test kit. Each handle has its
// own client, so Reopen reaches the stored state over a new connection.
type fenceResource struct {
	f    *Fence
	c    *redis.Client
	url  string
	name string
}

func openFenceResource(url, name string) (*fenceResource, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	c := redis.NewClient(opts)
	f, err := NewFence(c, name)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &fenceResource{f: f, c: c, url: url, name: name}, nil
}

func (r *fenceResource) Write(ctx context.Context, token uint64, value string) (bool, error) {
	return r.f.Write(ctx, token, value)
}

func (r *fenceResource) State(ctx context.Context) (uint64, string, error) {
	return r.f.Read(ctx)
}

func (r *fenceResource) Reopen(context.Context) (fencingtest.Resource, error) {
	return openFenceResource(r.url, r.name)
}

func (r *fenceResource) Close() error { return r.c.Close() }

func TestFenceKeys(t *testing.T) {
	url := serverURL(t)
	f, raw, name := newTestFence(t, url)
	ctx := callCtx(t)
	if ok, err := f.Write(ctx, 42, "batch-7"); err != nil || !ok {
		t.Fatalf("Write(42) = %t, %v; want accepted", ok, err)
	}
	for key, want := range map[string]string{"{" + name + "}:token": "42", "{" + name + "}:value": "batch-7"} {
		got, err := raw.Get(ctx, key).Result()
		if err != nil || got != want {
			t.Errorf("GET %s = %q, %v; want %q", key, got, err, want)
		}
		if ttl, err := raw.PTTL(ctx, key).Result(); err != nil || ttl >= 0 {
			t.Errorf("PTTL %s = %v, %v; want no expiry", key, ttl, err)
		}
	}
}

// TestFenceFullRange checks that tokens beyond the int64 range, which no
// Simba backend issues but a Fence accepts, still compare exactly.
func TestFenceFullRange(t *testing.T) {
	f, _, _ := newTestFence(t, serverURL(t))
	ctx := callCtx(t)
	steps := []struct {
		token uint64
		want  bool
	}{
		{math.MaxUint64 - 1, true},
		{math.MaxUint64 - 2, false},
		{math.MaxInt64, false},
		{math.MaxUint64 - 1, true},
		{math.MaxUint64, true},
	}
	for _, s := range steps {
		if got, err := f.Write(ctx, s.token, "v"); err != nil || got != s.want {
			t.Errorf("Write(%d) = %t, %v; want %t", s.token, got, err, s.want)
		}
	}
	if token, _, err := f.Read(ctx); err != nil || token != math.MaxUint64 {
		t.Errorf("Read() token = %d, %v; want %d", token, err, uint64(math.MaxUint64))
	}
}

// TestFenceDamagedKey checks that a token key written by something else is
// reported, not treated as token 0.
func TestFenceDamagedKey(t *testing.T) {
	url := serverURL(t)
	tests := []struct {
		name    string
		token   string // stored as a string, or as a hash field when hash is set
		hash    bool
		wantIs  error  // matched by the Write error, when set
		wantMsg string // contained in the Write error
	}{
		{name: "not a number", token: "seven", wantMsg: "does not hold a token"},
		{name: "leading zero", token: "007", wantMsg: "does not hold a token"},
		{name: "wrong type", token: "1", hash: true, wantIs: ErrWrongType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, raw, name := newTestFence(t, url)
			ctx := callCtx(t)
			key := "{" + name + "}:token"
			var damage error
			if tt.hash {
				damage = raw.HSet(ctx, key, "token", tt.token).Err()
			} else {
				damage = raw.Set(ctx, key, tt.token, 0).Err()
			}
			if damage != nil {
				t.Fatalf("damage: %v", damage)
			}
			ok, err := f.Write(ctx, 1, "v")
			if err == nil {
				t.Fatalf("Write on a damaged token key = %t, nil; want an error", ok)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Write error %v does not match %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.HasPrefix(err.Error(), "simbaredis: ") {
				t.Errorf("Write error %q: want the package prefix and %q", err, tt.wantMsg)
			}
			if _, _, err := f.Read(ctx); err == nil {
				t.Error("Read on a damaged token key returned no error")
			}
		})
	}
}

func ExampleFence() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	fence, err := NewFence(client, "ledger")
	if err != nil {
		log.Fatal(err)
	}

	// In the leader's work, with the token of its term.
	ctx := context.Background()
	var token uint64 = 8 // term.Token()
	ok, err := fence.Write(ctx, token, "batch-42")
	switch {
	case err != nil:
		log.Printf("outcome unknown, retry with the same token: %v", err)
	case !ok:
		log.Print("a newer term has written: this node is no longer the leader")
	}
	highest, value, err := fence.Read(ctx)
	if err == nil {
		log.Printf("highest token %d, value %q", highest, value)
	}
}
