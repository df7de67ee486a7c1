package simbaredis

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// renewal is a keep-alive request for lease that holds nothing.
func renewal(lease time.Duration) simba.KeepAliveRequest { return simba.KeepAliveRequest{Lease: lease} }

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
// not grow with the leases the session holds (target: within 2x of one
// lease), and the keep-alive finds nothing lost.
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
	req := simba.KeepAliveRequest{Lease: time.Minute, Held: map[string]uint64{}}
	for _, n := range []int{1, 3000} {
		req.Held = maps.Clone(req.Held)
		for len(req.Held) < n {
			name := fmt.Sprint("flat.", len(req.Held))
			req.Held[name] = mustWin(t, b, g.ID, name).Token
		}
		req.Generation++
		if _, err := b.KeepAlive(ctx, g.ID, req); err != nil { // the script is warm
			t.Fatal(err)
		}
		if err := raw.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		reply, err := b.KeepAlive(ctx, g.ID, req)
		if err != nil || len(reply.Lost) != 0 {
			t.Fatalf("KeepAlive with %d leases = %+v, %v; want nothing lost", n, reply, err)
		}
		cost[n], _ = serverCommands(ctx, t, raw)
		_, names := serverCommands(ctx, t, raw)
		t.Logf("keep-alive with %d leases: %d commands %v", n, cost[n], names)
	}
	if cost[1] == 0 || cost[3000] > 2*cost[1] {
		t.Fatalf("keep-alive ran %d commands at 1 lease and %d at 3000, want at most twice as many", cost[1], cost[3000])
	}
}

// TestKeepAliveChecksEveryHeldLeaseInTurn: with more leases held than a
// keep-alive checks, one whose hash another program deleted is reported
// lost within len(Held)/simba.MinLeaseChecks keep-alives (rounded up),
// and no lease held at its token is.
func TestKeepAliveChecksEveryHeldLeaseInTurn(t *testing.T) {
	url := serverURL(t)
	b := openBackend(t, url, Options{})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	req := simba.KeepAliveRequest{Lease: 10 * time.Second, Held: make(map[string]uint64), Generation: 1}
	for i := range n {
		name := fmt.Sprint("turn.", i)
		req.Held[name] = mustWin(t, b, g.ID, name).Token
	}
	for _, gone := range []string{"turn.3", "turn.10"} {
		if err := rawClient(t, url).Del(ctx, b.KeyPrefix()+"lease:"+gone).Err(); err != nil {
			t.Fatal(err)
		}
		found := false
		for range (n + simba.MinLeaseChecks - 1) / simba.MinLeaseChecks {
			r, err := b.KeepAlive(ctx, g.ID, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range r.Lost {
				if name != gone {
					t.Fatalf("KeepAlive.Lost = %v, want only %s", r.Lost, gone)
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("%d keep-alives did not report %s lost", (n+simba.MinLeaseChecks-1)/simba.MinLeaseChecks, gone)
		}
		delete(req.Held, gone)
		req.Generation++
	}
	// A caller that sends another Held under the same Generation gets
	// checks of the names it sent.
	other := make(map[string]uint64, len(req.Held))
	for name := range req.Held {
		other["other."+name] = 1
	}
	r, err := b.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: req.Lease, Held: other, Generation: req.Generation})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range r.Lost {
		if _, ok := other[name]; !ok {
			t.Fatalf("KeepAlive.Lost = %v names %q, which the request did not hold", r.Lost, name)
		}
	}
	if len(r.Lost) != simba.MinLeaseChecks {
		t.Fatalf("KeepAlive.Lost = %v, want %d names of the Held sent", r.Lost, simba.MinLeaseChecks)
	}
}

// TestCloseWakesWaitersOfALeaseWonWhileTheyWaited: a session that wins a
// lease other nodes still wait for (the first of the queue, woken by a
// release) and then closes announces it to them, though it was not the
// owner when they started waiting.
func TestCloseWakesWaitersOfALeaseWonWhileTheyWaited(t *testing.T) {
	url := serverURL(t)
	prefix := testPrefix()
	a := openBackend(t, url, Options{KeyPrefix: prefix})
	first := openBackend(t, url, Options{KeyPrefix: prefix})
	second := openBackend(t, url, Options{KeyPrefix: prefix})
	ctx := callCtx(t)
	ga, err := a.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gf, err := first.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := mustWin(t, a, ga.ID, "q")
	chFirst := watchSubscribed(wctx, t, first, "q")
	chSecond := watchSubscribed(wctx, t, second, "q")
	if err := a.Release(ctx, ga.ID, "q", r.Token); err != nil {
		t.Fatal(err)
	}
	mustFire(t, chFirst, "the release, for the first in line")
	mustWin(t, first, gf.ID, "q")
	select {
	case <-chSecond:
		t.Fatal("the second in line was woken by a release the first took")
	case <-time.After(100 * time.Millisecond):
	}
	if err := first.CloseSession(ctx, gf.ID); err != nil {
		t.Fatal(err)
	}
	mustFire(t, chSecond, "the close of the session that won the lease while it waited")
}
