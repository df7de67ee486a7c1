package simbaredis

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// TestPermitRecord: the semaphore's record P permits:<name> keeps the
// number of permits and the highest token of its slots and never expires.
// A slot's token is above that token even when it came from another
// slot's counter far ahead of the server's clock, and stays above it after
// Sweep removed the hashes of every slot and the floor with them. A
// mismatch names both numbers.
func TestPermitRecord(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	b := openBackend(t, url, Options{})
	p, ctx := b.KeyPrefix(), callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	permit := func(n, slot int) (simba.AcquireResult, error) {
		return b.AcquirePermit(ctx, g.ID, simba.Permit{Semaphore: "sem", Permits: n, Slot: slot})
	}
	won := func(n, slot int, above uint64) uint64 {
		t.Helper()
		r, err := permit(n, slot)
		if err != nil || !r.Won || r.Token <= above {
			t.Fatalf("slot %d of %d = %+v, %v; want won with a token above %d", slot, n, r, err, above)
		}
		return r.Token
	}
	wantRecord := func(n int, token uint64) {
		t.Helper()
		got, err := raw.HGetAll(ctx, p+"permits:sem").Result()
		if err != nil || len(got) != 2 || got["n"] != strconv.Itoa(n) || got["token"] != strconv.FormatUint(token, 10) {
			t.Fatalf("record = %v, %v; want n %d, token %d", got, err, n, token)
		}
		if ttl, err := raw.PTTL(ctx, p+"permits:sem").Result(); err != nil || ttl != -1 {
			t.Fatalf("PTTL of the record = %v, %v; want none", ttl, err)
		}
	}
	now, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := uint64(now.Add(time.Hour).UnixMicro())
	if err := raw.HSet(ctx, p+"lease:sem:1", "token", ahead).Err(); err != nil {
		t.Fatal(err)
	}
	t1 := won(2, 1, 0)
	if t1 != ahead+1 {
		t.Fatalf("slot 1 after its counter of %d: token %d, want %d", ahead, t1, ahead+1)
	}
	t0 := won(2, 0, 0)
	if t0 != ahead+2 {
		t.Fatalf("slot 0 after slot 1 took %d: token %d, want %d (the semaphore's, not the clock)", t1, t0, ahead+2)
	}
	wantRecord(2, t0)

	_, err = permit(3, 2)
	if !errors.Is(err, simba.ErrPermitsMismatch) || !strings.Contains(err.Error(), "under 2, asked with 3") {
		t.Fatalf("3 permits while 2-permit slots are held: %v; want ErrPermitsMismatch naming 2 and 3", err)
	}
	wantRecord(2, t0)

	for slot, tok := range []uint64{t0, t1} {
		name := simba.PermitName("sem", slot)
		if err := b.Release(ctx, g.ID, name, tok); err != nil {
			t.Fatal(err)
		}
		raw.HSet(ctx, p+"lease:"+name, "since", 1)
	}
	if n, err := b.Sweep(ctx, time.Hour); err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want both slots removed", n, err)
	}
	if err := raw.Del(ctx, p+"floor").Err(); err != nil {
		t.Fatal(err)
	}
	t2 := won(3, 2, t0)
	if t2 != t0+1 {
		t.Fatalf("a new slot after the sweep: token %d, want %d, above the record", t2, t0+1)
	}
	wantRecord(3, t2)
}
