package capi

import (
	"strings"
	"testing"

	simba "github.com/simba-go/simba/core"
)

func TestSemaphoreLifecycle(t *testing.T) {
	url := storeURL()
	a, b := open(t, url), open(t, url)
	first, err := AcquirePermit(a, "pool", 2, 5000, 0, false)
	wantStatus(t, "first permit", err, OK)
	second, err := AcquirePermit(b, "pool", 2, 0, 0, true)
	wantStatus(t, "second permit", err, OK)
	t1, _ := Token(first)
	t2, err := Token(second)
	wantStatus(t, "token", err, OK)
	if t2 <= t1 {
		t.Fatalf("tokens %d then %d, want increasing", t1, t2)
	}
	_, err = AcquirePermit(b, "pool", 2, 0, 0, true)
	wantStatus(t, "try-acquire of a full semaphore", err, LockHeld)
	_, err = AcquirePermit(b, "pool", 2, 0, 0, false)
	wantStatus(t, "acquire of a full semaphore, timeout 0", err, LockTimeout)
	_, err = AcquirePermit(b, "pool", 2, 50, 0, false)
	wantStatus(t, "acquire of a full semaphore, timeout 50ms", err, LockTimeout)
	_, err = AcquirePermit(b, "pool", 3, 0, 0, true)
	wantStatus(t, "another number of permits", err, PermitsMismatch)
	if err == nil || !strings.Contains(err.Error(), "3") {
		t.Fatalf("mismatch error %v does not say the numbers", err)
	}
	wantStatus(t, "release", Release(first, 5000), OK)
	third, err := AcquirePermit(b, "pool", 2, 5000, 0, false)
	wantStatus(t, "permit after a release", err, OK)
	if t3, _ := Token(third); t3 <= t2 {
		t.Fatalf("token %d after %d, want increasing", t3, t2)
	}
	for _, h := range []uint64{first, second, third} {
		wantStatus(t, "free", FreeTerm(h), OK)
	}
}

func TestSemaphoreBadInput(t *testing.T) {
	c := open(t, storeURL())
	long := strings.Repeat("n", 126) // "n:0" fits 128 characters, "n:99" does not
	for _, tc := range []struct {
		what    string
		client  uint64
		name    string
		permits int64
		want    Status
	}{
		{"client 0", 0, "pool", 2, BadHandle},
		{"unknown client", 1 << 40, "pool", 2, BadHandle},
		{"empty name", c, "", 2, InvalidName},
		{"bad name", c, "a b", 2, InvalidName},
		{"bad UTF-8", c, "\xff", 2, InvalidName},
		{"0 permits", c, "pool", 0, InvalidArgument},
		{"negative permits", c, "pool", -1, InvalidArgument},
		{"too many permits", c, "pool", simba.MaxPermits + 1, InvalidArgument},
		{"huge permits", c, "pool", 1 << 40, InvalidArgument},
		{"name too long for its last slot", c, long, 100, InvalidName},
	} {
		for _, try := range []bool{false, true} {
			h, err := AcquirePermit(tc.client, tc.name, tc.permits, 100, 0, try)
			if h != 0 {
				t.Errorf("%s: handle %d", tc.what, h)
			}
			if got := StatusOf(err); got != tc.want {
				t.Errorf("%s (try %v): status %v (%v), want %v", tc.what, try, got, err, tc.want)
			}
		}
	}
	h, err := AcquirePermit(c, long, 10, 100, 0, true)
	wantStatus(t, "a long name whose last slot fits", err, OK)
	wantStatus(t, "free", FreeTerm(h), OK)
	_, err = AcquirePermit(c, "pool", 2, -5, 0, false)
	wantStatus(t, "negative timeout", err, InvalidArgument)
}
