package simbaredis

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// serverCommands returns the number of commands the server ran since its
// last CONFIG RESETSTAT, those run by scripts included, leaving out the
// EVALSHA calls themselves and the statistics commands.
func serverCommands(ctx context.Context, t *testing.T, raw *redis.Client) (total int, names []string) {
	t.Helper()
	info, err := raw.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if name == "evalsha" || name == "info" || name == "config|resetstat" {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q", line)
		}
		total += n
		names = append(names, fmt.Sprintf("%s=%d", name, n))
	}
	return total, names
}

// TestKeepAliveCostFlat: the commands a keep-alive runs on the server do
// not grow with the leases the session owns (target: within 2x of one
// lease), and the reply still lists every lease.
func TestKeepAliveCostFlat(t *testing.T) {
	srv := startServer(t)
	raw := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", srv.port)})
	defer raw.Close()
	b := openBackend(t, srv.url(), Options{})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cost := make(map[int]int)
	held := 0
	for _, n := range []int{1, 3000} {
		for ; held < n; held++ {
			mustWin(t, b, g.ID, fmt.Sprint("flat.", held))
		}
		if _, err := b.KeepAlive(ctx, g.ID, time.Minute); err != nil { // the view and the script are warm
			t.Fatal(err)
		}
		if err := raw.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		reply, err := b.KeepAlive(ctx, g.ID, time.Minute)
		if err != nil || len(reply.Leases) != n {
			t.Fatalf("KeepAlive with %d leases = %d leases, %v", n, len(reply.Leases), err)
		}
		cost[n], _ = serverCommands(ctx, t, raw)
		_, names := serverCommands(ctx, t, raw)
		t.Logf("keep-alive with %d leases: %d commands %v", n, cost[n], names)
	}
	if cost[1] == 0 || cost[3000] > 2*cost[1] {
		t.Fatalf("keep-alive ran %d commands at 1 lease and %d at 3000, want at most twice as many", cost[1], cost[3000])
	}
}

// TestKeepAliveSeesChangesItDidNotMake: the Backend's view of a session
// is only a guess; acquires and releases it did not see (another Backend
// working for the same session id, as after a lost reply) and leases
// changed by another program reach the next keep-alive.
func TestKeepAliveSeesChangesItDidNotMake(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	b := openBackend(t, url, Options{})
	other := openBackend(t, url, Options{KeyPrefix: b.KeyPrefix()})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := func(why string, leases map[string]uint64) {
		t.Helper()
		for range 2 { // the second keep-alive runs with the digests in agreement
			r, err := b.KeepAlive(ctx, g.ID, 5*time.Second)
			if err != nil || !maps.Equal(r.Leases, leases) {
				t.Fatalf("KeepAlive = %v, %v; want %v: %s", r.Leases, err, leases, why)
			}
		}
	}
	ta, tb := mustWin(t, b, g.ID, "a").Token, mustWin(t, b, g.ID, "b").Token
	want("its own wins", map[string]uint64{"a": ta, "b": tb})
	tc := mustWin(t, other, g.ID, "c").Token
	want("a win it did not see", map[string]uint64{"a": ta, "b": tb, "c": tc})
	if err := other.Release(ctx, g.ID, "a", ta); err != nil {
		t.Fatal(err)
	}
	want("a release it did not see", map[string]uint64{"b": tb, "c": tc})
	tb2 := mustWin(t, other, g.ID, "b").Token
	want("a new term it did not see", map[string]uint64{"b": tb2, "c": tc})

	// Another program writes over a lease hash: a session owning few
	// leases notices at the next keep-alive.
	raw.HSet(ctx, b.KeyPrefix()+"lease:c", "session", "someone-else")
	want("a lease hash changed by another program", map[string]uint64{"b": tb2})

	// With many leases, the random checks find it within a few dozen
	// keep-alives (each misses it with a probability below 0.9).
	for i := range 30 {
		mustWin(t, b, g.ID, fmt.Sprint("many.", i))
	}
	raw.Del(ctx, b.KeyPrefix()+"lease:many.7")
	for i := 0; ; i++ {
		r, err := b.KeepAlive(ctx, g.ID, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.Leases["many.7"]; !ok {
			if len(r.Leases) != 30 {
				t.Fatalf("KeepAlive lists %d leases, want 30", len(r.Leases))
			}
			break
		}
		if i == 1000 {
			t.Fatal("1000 keep-alives still list a lease whose hash was deleted")
		}
	}
}

// TestKeepAliveWhileAcquiring: keep-alives that run while the session wins
// and releases leases report what the server held when they ran, and the
// view ends up equal to the server's.
func TestKeepAliveWhileAcquiring(t *testing.T) {
	url := serverURL(t)
	raw := rawClient(t, url)
	b := openBackend(t, url, Options{})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var workers, renewer sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 300 {
				name := fmt.Sprint("w.", rng.IntN(20))
				r, err := b.Acquire(ctx, g.ID, name)
				if err != nil || !r.Won {
					t.Errorf("Acquire(%s) = %+v, %v", name, r, err)
					return
				}
				if rng.IntN(2) == 0 {
					if err := b.Release(ctx, g.ID, name, r.Token); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	renewals := 0
	renewer.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.KeepAlive(ctx, g.ID, 10*time.Second); err != nil {
				t.Error(err)
				return
			}
			renewals++
		}
	})
	workers.Wait()
	close(stop)
	renewer.Wait()
	t.Logf("%d keep-alives ran during 1200 acquires", renewals)
	truth := serverLeases(ctx, t, raw, b.KeyPrefix(), g.ID)
	r, err := b.KeepAlive(ctx, g.ID, 10*time.Second)
	if err != nil || !maps.Equal(r.Leases, truth) {
		t.Fatalf("KeepAlive = %v, %v; want the server's %v", r.Leases, err, truth)
	}
	b.owned.mu.Lock()
	view := maps.Clone(b.owned.views[string(g.ID)].leases)
	b.owned.mu.Unlock()
	if !maps.Equal(view, truth) {
		t.Fatalf("the Backend's view is %v, want the server's %v", view, truth)
	}
}

// serverLeases reads the leases the session hash of s names, checking
// that each lease hash names s with the same token.
func serverLeases(ctx context.Context, t *testing.T, raw *redis.Client, prefix string, s simba.SessionID) map[string]uint64 {
	t.Helper()
	fields, err := raw.HGetAll(ctx, prefix+"session:"+string(s)).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]uint64)
	var digest int64
	for f, v := range fields {
		name, ok := strings.CutPrefix(f, "+")
		if !ok {
			continue
		}
		tok, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("session field %s = %q", f, v)
		}
		lease, err := raw.HMGet(ctx, prefix+"lease:"+name, "session", "token").Result()
		if err != nil || lease[0] != string(s) || lease[1] != v {
			t.Fatalf("lease %s = %v, %v; the session hash says token %s", name, lease, err, v)
		}
		out[name] = tok
		digest += leaseDigest(name, tok)
	}
	if fields["digest"] != strconv.FormatInt(digest, 10) {
		t.Fatalf("session digest %q, want %d, the sum over its leases", fields["digest"], digest)
	}
	return out
}

// TestLeaseDigestMatchesScripts pins the Lua digest (the keep-alive hashes
// the name itself, acquire gets the coefficients from the client) to
// leaseDigest, over names of any bytes and tokens of any size.
func TestLeaseDigestMatchesScripts(t *testing.T) {
	raw := rawClient(t, serverURL(t))
	ctx := callCtx(t)
	fromName := redis.NewScript(luaShare + luaDigest + `return digest(ARGV[1], ARGV[2])`)
	fromCoefficients := redis.NewScript(luaShare + `return share(tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[1])`)
	names := []string{"a", "bench", "lease-000042", "ünïcødé/名前", strings.Repeat("x", 300), "\x00\xff"}
	tokens := []uint64{1, 2, 999_999, 1_000_000, 1_000_001, 1<<53 + 1, 123_456_789_012_345_678, math.MaxUint64}
	for _, name := range names {
		hi, lo, b := nameCoefficients(name)
		if lo%2 != 1 || hi >= 1<<20 || lo >= 1<<20 || b >= 1<<40 {
			t.Fatalf("nameCoefficients(%q) = %d, %d, %d", name, hi, lo, b)
		}
		for _, tok := range tokens {
			want := leaseDigest(name, tok)
			if want < -1<<39 || want >= 1<<39 {
				t.Fatalf("leaseDigest(%q, %d) = %d, outside [-2^39, 2^39)", name, tok, want)
			}
			s := strconv.FormatUint(tok, 10)
			if got, err := fromName.Run(ctx, raw, nil, name, s).Int64(); err != nil || got != want {
				t.Errorf("Lua digest(%q, %s) = %d, %v; leaseDigest = %d", name, s, got, err, want)
			}
			if got, err := fromCoefficients.Run(ctx, raw, nil, s, hi, lo, b).Int64(); err != nil || got != want {
				t.Errorf("Lua share(%q's coefficients, %s) = %d, %v; leaseDigest = %d", name, s, got, err, want)
			}
		}
	}
	// A token that differs by less than 10^6 always changes the share.
	for _, name := range names {
		for _, d := range []uint64{1, 2, 1 << 10, 999_999} {
			if leaseDigest(name, 7) == leaseDigest(name, 7+d) {
				t.Errorf("leaseDigest(%q) is the same at tokens 7 and %d", name, 7+d)
			}
		}
	}
}
