package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// The semaphore lines: Client.Semaphore(name, semPermits).Acquire and
// LockTerm.Release, and the floor of a counting semaphore beside them.
const (
	opSemaphore = "semaphore_acquire_release"
	semPermits  = 4  // permits of every semaphore of the run
	semMany     = 16 // goroutines of the _c16 line, each on a semaphore of its own
	semShared   = 8  // goroutines, each a node of its own, sharing one semaphore
)

// opSemaphoreMany names the semaphore line of n goroutines at once, each
// on a semaphore of its own.
func opSemaphoreMany(n int) string { return fmt.Sprintf("%s_c%d", opSemaphore, n) }

// opSemaphoreContended names the line of n goroutines sharing the
// semPermits permits of one semaphore.
func opSemaphoreContended(n int) string { return fmt.Sprintf("semaphore_contended_c%d", n) }

// semShape is one semaphore line: how many goroutines, and whether they
// share one semaphore (each then a node of its own) or each use one of
// their own.
type semShape struct {
	op      string
	workers int
	shared  bool
}

// semShapes are the semaphore lines of every backend, in order.
var semShapes = []semShape{
	{opSemaphore, 1, false},
	{opSemaphoreMany(semMany), semMany, false},
	{opSemaphoreContended(semShared), semShared, true},
}

// semNames returns the semaphore name of each worker of sh: one name for
// all when they share it, else one each.
func semNames(sh semShape) []string {
	if !sh.shared {
		return names(sh.op, sh.workers)
	}
	out := make([]string, sh.workers)
	for i := range out {
		out[i] = sh.op
	}
	return out
}

// semImpl is one implementation of a counting semaphore: mk builds its
// operation for a line, a semaphore name per worker (the same name for
// all of them on a shared line). When counted is set, the operation
// records its attempts in t and the line has a tries_per_op metric.
type semImpl struct {
	name    string
	counted bool
	mk      func(sh semShape, names []string, t *semTries) (opFunc, error)
}

// semaphoreCases returns the cases of every semaphore line of every
// implementation, in order.
func (s *settings) semaphoreCases(backend string, impls []semImpl) ([]benchCase, error) {
	var out []benchCase
	for _, im := range impls {
		for _, sh := range semShapes {
			t := &semTries{}
			f, err := im.mk(sh, semNames(sh), t)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", im.name, sh.op, err)
			}
			l := &loop{
				lid: lineID{backend, im.name, sh.op}, workers: sh.workers,
				dur: s.duration, warmup: s.warmup, op: f,
			}
			if im.counted {
				out = append(out, &triesLoop{loop: l, t: t})
			} else {
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// simbaSemaphoreImpl is Simba's semaphore (impl "simba"): on a line of
// semaphores of their own, one client for all the workers; on a shared
// line, a client and a backend for each worker, as separate processes
// would have. open returns a backend with room for conns calls at once.
// On a backend without simba.PermitAcquirer every Acquire fails with
// simba.ErrNotSupported, and the harness skips the line.
func simbaSemaphoreImpl(su *suite, open func(conns int) (simba.Backend, error)) semImpl {
	return semImpl{implSimba, false, func(sh semShape, ns []string, _ *semTries) (opFunc, error) {
		sems := make([]*simba.Semaphore, len(ns))
		var c *simba.Client
		for i, n := range ns {
			if c == nil || sh.shared {
				conns := len(ns)
				if sh.shared {
					conns = 1
				}
				b, err := open(conns)
				if err != nil {
					return nil, err
				}
				if c, err = newSimba(su, b); err != nil {
					return nil, err
				}
			}
			sems[i] = c.Semaphore(n, semPermits)
		}
		return func(ctx context.Context, w int) error {
			lt, err := sems[w].Acquire(ctx)
			if err != nil {
				return err
			}
			return lt.Release(ctx)
		}, nil
	}}
}

// semTries counts the attempts of a floor: tries_per_op is their number
// over the permits won, 1 when no attempt found every permit taken.
type semTries struct{ tries, ops atomic.Int64 }

func (t *semTries) add(tries int) {
	t.tries.Add(int64(tries))
	t.ops.Add(1)
}

// triesLoop is a loop whose line adds the tries_per_op of its round
// (the warm-up's attempts not counted).
type triesLoop struct {
	*loop
	t *semTries
}

func (l *triesLoop) round(ctx context.Context) (sample, error) {
	if !l.warmupDone {
		if _, err := l.run(ctx, l.warmup); err != nil {
			return sample{}, fmt.Errorf("warm-up: %w", err)
		}
		l.warmupDone = true
	}
	l.t.tries.Store(0)
	l.t.ops.Store(0)
	s, err := l.run(ctx, l.dur)
	if err != nil {
		return sample{}, err
	}
	s.extra = append(s.extra, metric{"tries_per_op", float64(l.t.tries.Load()) / float64(max(l.t.ops.Load(), 1))})
	return s, nil
}

// memorySemaphoreFloor is the floor of the memory backend's semaphore
// (impl "floor"): the backend's AcquirePermit and Release called
// directly, each worker on a session of its own. A worker tries the
// slots one after the other from its own, and starts again at once when
// all are taken, until one is won; tries_per_op counts the passes over
// the slots.
func memorySemaphoreFloor(ctx context.Context, open func() simba.Backend) semImpl {
	return semImpl{implFloor, true, func(_ semShape, ns []string, t *semTries) (opFunc, error) {
		b := open()
		pa, ok := b.(simba.PermitAcquirer)
		if !ok {
			return nil, fmt.Errorf("%T has no AcquirePermit", b)
		}
		sess := make([]simba.SessionID, len(ns))
		for i := range sess {
			g, err := b.OpenSession(ctx, time.Hour)
			if err != nil {
				return nil, err
			}
			sess[i] = g.ID
		}
		return func(ctx context.Context, w int) error {
			for try := 0; ; try++ {
				if err := ctx.Err(); err != nil {
					return err
				}
				p := simba.Permit{Semaphore: ns[w], Permits: semPermits, Slot: (w + try) % semPermits}
				r, err := pa.AcquirePermit(ctx, sess[w], p)
				if err != nil {
					return err
				}
				if r.Won {
					t.add(try/semPermits + 1)
					return b.Release(ctx, sess[w], simba.PermitName(p.Semaphore, p.Slot), r.Token)
				}
			}
		}, nil
	}}
}

// redisSemAcquire takes a permit of the counting semaphore KEYS[1], a
// sorted set of holders scored by the server time (ms) at which they
// expire: it drops the expired holders, and adds ARGV[3] with an expiry
// of ARGV[2] ms when fewer than ARGV[1] remain. It returns 1 when the
// permit was taken, else 0.
var redisSemAcquire = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  return 1
end
return 0
`)

// redisSemaphoreFloor is the floor of a counting semaphore with expiry on
// Redis (impl "floor"): one script per attempt (redisSemAcquire) and a
// ZREM of the holder to release, on one client. An attempt that finds
// every permit taken is made again at once, until one is won; the
// tries_per_op metric counts them. It hands out no fencing token and
// queues no waiter.
func redisSemaphoreFloor(c *redis.Client) semImpl {
	return semImpl{implFloor, true, func(_ semShape, ns []string, t *semTries) (opFunc, error) {
		keys := peerKeys("floor:sem", ns)
		seq := make([]int64, len(ns))
		ttl := strconv.FormatInt(peerTTL.Milliseconds(), 10)
		return func(ctx context.Context, w int) error {
			seq[w]++
			member := strconv.Itoa(w) + "." + strconv.FormatInt(seq[w], 10)
			for try := 1; ; try++ {
				won, err := redisSemAcquire.Run(ctx, c, keys[w:w+1], semPermits, ttl, member).Int()
				if err != nil {
					return err
				}
				if won == 1 {
					t.add(try)
					break
				}
			}
			n, err := c.ZRem(ctx, keys[w], member).Result()
			if err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("ZREM %s %s: not a holder (expired)", keys[w], member)
			}
			return nil
		}, nil
	}}
}
