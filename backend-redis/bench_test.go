package simbaredis

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	simba "github.com/simba-go/simba/core"
)

// The benchmarks measure one operation on the test server over loopback;
// the comparison with other lock libraries lives in tools/bench.

// benchSession opens a Backend on the test server, a session of it and a
// plain client for the server's counters.
func benchSession(b *testing.B) (*Backend, context.Context, simba.SessionGrant, *redis.Client) {
	be := openBackend(b, serverURL(b), Options{})
	ctx := callCtx(b)
	g, err := be.OpenSession(ctx, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	return be, ctx, g, rawClient(b, serverURL(b))
}

func BenchmarkAcquireRelease(b *testing.B) {
	be, ctx, g, raw := benchSession(b)
	before := readServerCost(ctx, b, raw)
	for b.Loop() {
		r, err := be.Acquire(ctx, g.ID, "bench")
		if err != nil || !r.Won {
			b.Fatalf("Acquire = %+v, %v", r, err)
		}
		if err := be.Release(ctx, g.ID, "bench", r.Token); err != nil {
			b.Fatal(err)
		}
	}
	before.report(ctx, b, raw)
}

// BenchmarkAcquireReleaseParallel is BenchmarkAcquireRelease with 64
// goroutines on one Backend and one session, each on a name of its own.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	be, ctx, g, raw := benchSession(b)
	var next atomic.Int64
	before := readServerCost(ctx, b, raw)
	b.SetParallelism(64 / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprint("bench.", next.Add(1))
		for pb.Next() {
			r, err := be.Acquire(ctx, g.ID, name)
			if err != nil || !r.Won {
				b.Errorf("Acquire = %+v, %v", r, err)
				return
			}
			if err := be.Release(ctx, g.ID, name, r.Token); err != nil {
				b.Error(err)
				return
			}
		}
	})
	before.report(ctx, b, raw)
}

// peerRelease is the release script of bsm/redislock: delete the key if it
// still holds the caller's token.
var peerRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// peerAcquireRelease is the shape of a bsm/redislock Obtain and Release
// (SET NX PX, then its release script) on a client built like Open's, as
// the yardstick of the benchmarks below; tools/bench runs the library
// itself.
func peerAcquireRelease(ctx context.Context, c *redis.Client, key string, token int64) error {
	tok := strconv.FormatInt(token, 10)
	ok, err := c.SetNX(ctx, key, tok, time.Minute).Result()
	if err != nil || !ok {
		return fmt.Errorf("SET NX %s = %v, %w", key, ok, err)
	}
	return peerRelease.Run(ctx, c, []string{key}, tok).Err()
}

func peerClient(b *testing.B) *redis.Client {
	opts, err := redis.ParseURL(serverURL(b))
	if err != nil {
		b.Fatal(err)
	}
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// BenchmarkPeerAcquireRelease is BenchmarkAcquireRelease for the shape of
// bsm/redislock (peerAcquireRelease).
func BenchmarkPeerAcquireRelease(b *testing.B) {
	c := peerClient(b)
	ctx := callCtx(b)
	key := testPrefix() + "peer"
	before := readServerCost(ctx, b, c)
	var i int64
	for b.Loop() {
		i++
		if err := peerAcquireRelease(ctx, c, key, i); err != nil {
			b.Fatal(err)
		}
	}
	before.report(ctx, b, c)
}

// BenchmarkPeerAcquireReleaseParallel is BenchmarkAcquireReleaseParallel
// for the shape of bsm/redislock.
func BenchmarkPeerAcquireReleaseParallel(b *testing.B) {
	c := peerClient(b)
	ctx := callCtx(b)
	prefix := testPrefix() + "peer."
	var next atomic.Int64
	before := readServerCost(ctx, b, c)
	b.SetParallelism(64 / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprint(prefix, next.Add(1))
		var i int64
		for pb.Next() {
			i++
			if err := peerAcquireRelease(ctx, c, key, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	before.report(ctx, b, c)
}

// serverCost is what the server had spent at one moment: the CPU time of
// its main thread, the commands it ran (those inside scripts included),
// the time spent in EVALSHA and the bytes it read and wrote, from INFO. The growth per operation is only meaningful on a
// server that runs nothing else meanwhile.
// It also keeps this process's CPU time, the client's share.
type serverCost struct{ cpuMicros, commands, clientMicros, scriptMicros, bytesIn, bytesOut float64 }

func readServerCost(ctx context.Context, b *testing.B, c *redis.Client) serverCost {
	info, err := c.Info(ctx, "cpu", "commandstats", "stats").Result()
	if err != nil {
		b.Fatal(err)
	}
	s := serverCost{clientMicros: processCPUMicros(b)}
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch {
		case k == "used_cpu_user_main_thread", k == "used_cpu_sys_main_thread":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpuMicros += f * 1e6
		case strings.HasPrefix(k, "cmdstat_"):
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, _ := strconv.ParseFloat(calls, 64)
			s.commands += n
			if k == "cmdstat_evalsha" {
				_, usec, _ := strings.Cut(v, "usec=")
				usec, _, _ = strings.Cut(usec, ",")
				f, _ := strconv.ParseFloat(usec, 64)
				s.scriptMicros += f
			}
		case k == "total_net_input_bytes":
			s.bytesIn, _ = strconv.ParseFloat(v, 64)
		case k == "total_net_output_bytes":
			s.bytesOut, _ = strconv.ParseFloat(v, 64)
		}
	}
	return s
}

// report reports the server's CPU time, commands, EVALSHA time and bytes
// per operation since s (the INFO call itself counts as one command).
func (s serverCost) report(ctx context.Context, b *testing.B, c *redis.Client) {
	now := readServerCost(ctx, b, c)
	n := float64(b.N)
	b.ReportMetric((now.cpuMicros-s.cpuMicros)/n, "server-µs/op")
	b.ReportMetric((now.commands-s.commands-1)/n, "server-cmds/op")
	b.ReportMetric((now.clientMicros-s.clientMicros)/n, "client-µs/op")
	b.ReportMetric((now.scriptMicros-s.scriptMicros)/n, "evalsha-µs/op")
	b.ReportMetric((now.bytesIn-s.bytesIn)/n, "in-B/op")
	b.ReportMetric((now.bytesOut-s.bytesOut)/n, "out-B/op")
}

// processCPUMicros is the CPU time this process has used, in µs.
func processCPUMicros(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// BenchmarkKeepAlive renews a session that holds 1 to 10,000 leases, as
// the engine does: with the leases held, none unsure.
func BenchmarkKeepAlive(b *testing.B) {
	for _, leases := range []int{1, 100, 2000, 10000} {
		b.Run(fmt.Sprintf("leases=%d", leases), func(b *testing.B) {
			be, ctx, g, raw := benchSession(b)
			req := simba.KeepAliveRequest{Lease: time.Minute, Held: make(map[string]uint64, leases), Generation: 1}
			for i := range leases {
				name := fmt.Sprint("bench.", i)
				r, err := be.Acquire(ctx, g.ID, name)
				if err != nil || !r.Won {
					b.Fatalf("Acquire = %+v, %v", r, err)
				}
				req.Held[name] = r.Token
			}
			before := readServerCost(ctx, b, raw)
			for b.Loop() {
				r, err := be.KeepAlive(ctx, g.ID, req)
				if err != nil || len(r.Lost) != 0 {
					b.Fatalf("KeepAlive = %d lost, %v", len(r.Lost), err)
				}
			}
			before.report(ctx, b, raw)
		})
	}
}

// BenchmarkClientMemoryPerLease reports the heap of a Simba client on this
// backend per held lease with 100,000 locks held (bytes/lease): the
// engine's terms (the Backend keeps nothing per lease).
func BenchmarkClientMemoryPerLease(b *testing.B) {
	const n = 100_000
	url := serverURL(b)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("lease-%06d", i)
	}
	for b.Loop() {
		be := openBackend(b, url, Options{})
		c, err := simba.New(be, simba.WithConfig(simba.Config{LeaseDuration: time.Minute}))
		if err != nil {
			b.Fatal(err)
		}
		ctx := callCtx(b)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		held := make([]*simba.LockTerm, n)
		var wg sync.WaitGroup
		for w := range 64 {
			wg.Go(func() {
				for i := w; i < n; i += 64 {
					lt, err := c.Lock(names[i]).Acquire(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					held[i] = lt
				}
			})
		}
		wg.Wait()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/lease")
		runtime.KeepAlive(held)
		_ = c.Close(ctx)
	}
}
