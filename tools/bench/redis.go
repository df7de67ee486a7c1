package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	simbaredis "github.com/simba-go/simba/backend-redis"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/tools/internal/wait"
)

// Every key the run writes starts with redisPrefix; the suite deletes
// them at the end.
const (
	redisPrefix = "simbabench:"
	peerTTL     = 10 * time.Second // lock TTL of the peers' acquire+release
)

func peerKeys(impl string, ns []string) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = redisPrefix + "peer:" + impl + ":" + n
	}
	return out
}

// redisSuite compares Simba's lock with bsm/redislock, redsync and the
// floor (SET NX PX then DEL), Simba's semaphore with the floor of a
// counting semaphore (a script over a sorted set of holders), then the
// keep-alive cost of one node holding many leases: Simba's one keep-alive
// against redislock refreshing every lock at the same interval.
func redisSuite(ctx context.Context, s *settings, rawURL string, su *suite) error {
	const backend = "redis"
	base, err := redis.ParseURL(rawURL)
	if err != nil {
		return fmt.Errorf("SIMBA_TEST_REDIS_URL: %w", err)
	}
	base.ContextTimeoutEnabled = true
	// Every implementation gets a client of its own with the same options.
	newClient := func(w *wire) *redis.Client {
		o := *base
		c := redis.NewClient(&o)
		if w != nil {
			c.AddHook(redisHook{w})
		}
		su.onClose(c.Close)
		return c
	}
	admin := newClient(nil)
	if err := admin.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	su.onClose(func() error { return deleteKeys(admin, redisPrefix+"*") })
	newBackend := func(c *redis.Client) (*simbaredis.Backend, error) {
		b, err := simbaredis.New(c, simbaredis.Options{KeyPrefix: redisPrefix})
		if err != nil {
			return nil, err
		}
		su.onClose(b.Close)
		return b, nil
	}

	cases, err := s.implCases(backend, 64, []impl{
		{implSimba, func(ns []string) (opFunc, error) {
			b, err := newBackend(newClient(nil))
			if err != nil {
				return nil, err
			}
			return simbaLockOp(su, b, ns)
		}},
		simbaAsyncImpl(func() (simba.Backend, error) { return newBackend(newClient(nil)) }, su),
		spiImpl(ctx, func() (simba.Backend, error) { return newBackend(newClient(nil)) }),
		{"redislock", func(ns []string) (opFunc, error) {
			lk, keys := redislock.New(newClient(nil)), peerKeys("redislock", ns)
			return func(ctx context.Context, w int) error {
				l, err := lk.Obtain(ctx, keys[w], peerTTL, nil)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			}, nil
		}},
		{"redsync", func(ns []string) (opFunc, error) {
			rs := redsync.New(goredis.NewPool(newClient(nil)))
			mus := make([]*redsync.Mutex, len(ns))
			for i, k := range peerKeys("redsync", ns) {
				mus[i] = rs.NewMutex(k, redsync.WithExpiry(peerTTL), redsync.WithTries(1))
			}
			return func(ctx context.Context, w int) error {
				if err := mus[w].LockContext(ctx); err != nil {
					return err
				}
				if ok, err := mus[w].UnlockContext(ctx); !ok {
					if err != nil {
						return fmt.Errorf("unlock: not held: %w", err)
					}
					return errors.New("unlock: not held")
				}
				return nil
			}, nil
		}},
		{implFloor, func(ns []string) (opFunc, error) {
			c, keys := newClient(nil), peerKeys("floor", ns)
			return func(ctx context.Context, w int) error {
				ok, err := c.SetNX(ctx, keys[w], "1", peerTTL).Result()
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("SET NX %s: key exists", keys[w])
				}
				return c.Del(ctx, keys[w]).Err()
			}, nil
		}},
	})
	if err != nil {
		return err
	}
	sem, err := s.semaphoreCases(backend, []semImpl{
		simbaSemaphoreImpl(su, func(int) (simba.Backend, error) { return newBackend(newClient(nil)) }),
		redisSemaphoreFloor(newClient(nil)),
	})
	if err != nil {
		return err
	}
	ha, err := newBackend(newClient(nil))
	if err != nil {
		return err
	}
	hb, err := newBackend(newClient(nil))
	if err != nil {
		return err
	}
	ho, err := simbaHandover(su, s, backend, ha, hb)
	if err != nil {
		return err
	}
	su.groups = append(su.groups, group{cases: cases, rounds: s.rounds},
		group{cases: sem, rounds: s.rounds},
		// Apart, so that its release subscriptions do not receive the
		// releases of the loops above.
		group{cases: []benchCase{ho}, rounds: s.rounds})

	server := infoCounter(admin)
	var herd []benchCase
	for _, w := range s.waiters {
		herd = append(herd, &herdHandover{
			lid: lineID{backend, implSimba, opHandoverW(w)}, s: s, waiters: w, server: server,
			open: func(context.Context) (simba.Backend, func() error, error) {
				o := *base
				c := redis.NewClient(&o)
				b, err := simbaredis.New(c, simbaredis.Options{KeyPrefix: redisPrefix})
				if err != nil {
					return nil, nil, errors.Join(err, c.Close())
				}
				return b, func() error { return errors.Join(b.Close(), c.Close()) }, nil
			},
		})
	}
	su.groups = append(su.groups, group{cases: herd, rounds: s.rounds})
	sb, err := newBackend(newClient(nil))
	if err != nil {
		return err
	}
	su.groups = append(su.groups, group{cases: []benchCase{
		newStateCase(lineID{backend, implSimba, opStateNames(s.names)}, s.names, sb, "bytes",
			func(ctx context.Context) (int64, error) { return usedMemory(ctx, admin) }),
	}, rounds: 1}, group{cases: []benchCase{newListCase(backend, s.listHeld, sb)}, rounds: 1})
	var ka []benchCase
	for _, n := range s.leases {
		ka = append(ka,
			&simbaKeepAlive{
				lid: lineID{backend, implSimba, opKeepAlive(n)}, s: s, leases: n, server: server,
				open: func(ctx context.Context) (kaBackend, error) {
					w := &wire{}
					o := *base
					c := redis.NewClient(&o)
					c.AddHook(redisHook{w})
					b, err := simbaredis.New(c, simbaredis.Options{KeyPrefix: redisPrefix})
					if err != nil {
						return kaBackend{}, errors.Join(err, c.Close())
					}
					return kaBackend{b: b, wire: w, close: func() error { return errors.Join(b.Close(), c.Close()) }}, nil
				},
			},
			&redislockKeepAlive{lid: lineID{backend, "redislock", opKeepAlive(n)}, s: s, leases: n, base: base, server: server},
		)
	}
	su.groups = append(su.groups, group{cases: ka, rounds: s.kaRounds})
	return nil
}

// infoCounter counts the commands the Redis server ran, from INFO
// commandstats: commands run inside scripts count too. It subtracts the
// INFO calls it made itself. Other clients of the server count as well.
func infoCounter(c *redis.Client) counter {
	var own int64
	return func(ctx context.Context) (int64, error) {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats: %w", err)
		}
		n, err := sumCommandStats(info)
		n -= own
		own++
		return n, err
	}
}

// sumCommandStats adds the calls= fields of an INFO commandstats reply.
func sumCommandStats(info string) (int64, error) {
	var total int64
	for line := range strings.Lines(info) {
		_, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats: line %q: %w", strings.TrimSpace(line), err)
		}
		total += n
	}
	return total, nil
}

// deleteKeys removes every key matching pattern.
func deleteKeys(c *redis.Client, pattern string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := c.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for it.Next(ctx) {
		if batch = append(batch, it.Val()); len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return errors.Join(it.Err(), flush())
}

// redislockKeepAlive measures bsm/redislock holding leases locks, each
// refreshed every renew interval by a pool of refreshers: refreshes per
// second (ops_s), commands the server ran (calls_s) and sent (wire_s), and
// the latency of one refresh.
type redislockKeepAlive struct {
	lid    lineID
	s      *settings
	leases int
	base   *redis.Options
	server counter
}

func (k *redislockKeepAlive) id() lineID { return k.lid }

func (k *redislockKeepAlive) round(ctx context.Context) (_ sample, err error) {
	w := &wire{}
	o := *k.base
	c := redis.NewClient(&o)
	c.AddHook(redisHook{w})
	defer func() { err = errors.Join(err, c.Close()) }()
	lk := redislock.New(c)
	ttl := keepAliveConfig(k.s.renew).LeaseDuration
	keys := peerKeys("ka", names("ka", k.leases))
	locks := make([]*redislock.Lock, len(keys))
	if err := parallel(ctx, len(keys), setupWorkers, func(ctx context.Context, i int) (err error) {
		locks[i], err = lk.Obtain(ctx, keys[i], ttl, nil)
		return err
	}); err != nil {
		return sample{}, fmt.Errorf("obtain %d locks: %w", k.leases, err)
	}
	defer func() {
		err = errors.Join(err, parallel(context.WithoutCancel(ctx), len(locks), setupWorkers, func(ctx context.Context, i int) error {
			if locks[i] == nil {
				return nil
			}
			if err := locks[i].Release(ctx); err != nil && !errors.Is(err, redislock.ErrLockNotHeld) {
				return err
			}
			return nil
		}))
	}()

	// Refreshers: each owns every refreshers-th lock and refreshes them
	// one after the other on every tick, as a per-lock renewer would.
	refreshers := min(setupWorkers, len(locks))
	var (
		refreshed, lost atomic.Int64
		mu              sync.Mutex
		lats            []time.Duration
		wg              sync.WaitGroup
	)
	rctx, stop := context.WithCancel(ctx)
	for r := range refreshers {
		wg.Go(func() {
			t := time.NewTicker(k.s.renew)
			defer t.Stop()
			var mine []time.Duration
			defer func() { mu.Lock(); lats = append(lats, mine...); mu.Unlock() }()
			for {
				select {
				case <-rctx.Done():
					return
				case <-t.C:
				}
				for i := r; i < len(locks); i += refreshers {
					start := time.Now()
					err := locks[i].Refresh(rctx, ttl, nil)
					if rctx.Err() != nil {
						return
					}
					if err != nil {
						lost.Add(1)
						continue
					}
					mine = append(mine, time.Since(start))
					refreshed.Add(1)
				}
			}
		})
	}
	r, err := func() ([]float64, error) {
		defer func() { stop(); wg.Wait() }()
		if err := wait.Sleep(ctx, k.s.renew); err != nil { // one full cycle before counting
			return nil, err
		}
		return rates(ctx, k.s.window, atomicCounter(&refreshed), w.count, k.server)
	}()
	if err != nil {
		return sample{}, err
	}
	if n := lost.Load(); n > 0 {
		fmt.Fprintf(k.s.log, "bench: %v: %d refreshes failed: those locks were lost\n", k.lid, n)
	}
	if len(lats) == 0 {
		// Every lock expired before its first refresh: the peer cannot hold
		// this many locks at this renewal on this machine.
		fmt.Fprintf(k.s.log, "bench: %v: no refresh completed\n", k.lid)
		return sample{extra: []metric{{"calls_s", r[2]}, {"wire_s", r[1]}}}, nil
	}
	s := sample{opsS: r[0], extra: []metric{{"calls_s", r[2]}, {"wire_s", r[1]}}}
	s.p50, s.p99 = latencies(lats)
	return s, nil
}
