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
