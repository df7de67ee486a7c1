package simbaredis

import (
	"testing"
	"time"
)

// TestTokensSurviveLostState: a Redis that lost every key of the prefix,
// lease hashes and floor alike (a failover to a replica that had none of
// them, a restart without persistence), still hands out a token above
// every earlier one: tokens are at least the server's TIME in
// microseconds (ADR 0020).
func TestTokensSurviveLostState(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	b := openBackend(t, url, Options{})
	ctx := callCtx(t)
	var highest uint64
	for round := range 3 {
		g, err := b.OpenSession(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			r := mustWin(t, b, g.ID, "n")
			if r.Token <= highest {
				t.Fatalf("round %d: token %d after the state was lost, not above the earlier %d", round, r.Token, highest)
			}
			highest = r.Token
		}
		deleteKeys(t, raw, b.KeyPrefix())
	}
}

// TestTokensFollowServerTime: a token is the server's TIME in
// microseconds when that is above the lease's token + 1 (and a swept
// name's floor + 1), which keeps it below 2^53 for JSON consumers; two
// acquires within one microsecond still differ by one.
func TestTokensFollowServerTime(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	b := openBackend(t, url, Options{})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	r := mustWin(t, b, g.ID, "n")
	after, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if r.Token < uint64(before.UnixMicro()) || r.Token > uint64(after.UnixMicro()) || r.Token >= 1<<53 {
		t.Fatalf("token %d, want the server's time in µs, in [%d, %d]", r.Token, before.UnixMicro(), after.UnixMicro())
	}
	// A counter ahead of the clock goes on from the counter.
	ahead := uint64(after.Add(time.Hour).UnixMicro())
	if err := raw.HSet(ctx, b.KeyPrefix()+"lease:n", "token", ahead).Err(); err != nil {
		t.Fatal(err)
	}
	if r := mustWin(t, b, g.ID, "n"); r.Token != ahead+1 {
		t.Fatalf("token %d after a counter of %d, want %d", r.Token, ahead, ahead+1)
	}
	// So does a floor ahead of the clock, for a name without a lease hash.
	if err := raw.Set(ctx, b.KeyPrefix()+"floor", ahead+10, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if r := mustWin(t, b, g.ID, "m"); r.Token != ahead+11 {
		t.Fatalf("token %d above a floor of %d, want %d", r.Token, ahead+10, ahead+11)
	}
}
