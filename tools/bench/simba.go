package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/tools/internal/wait"
)

// Operation names of the output lines.
const (
	opAcquireRelease = "acquire_release"
	opAcquireC64     = "acquire_release_c64" // Redis and memory
	opAcquireC16     = "acquire_release_c16" // SQL
	opHandover       = "handover"
	implSimba        = "simba"
	implFloor        = "floor"
	implSPI          = "spi"
	implSimbaAsync   = "simba_async"
)

func opKeepAlive(leases int) string { return fmt.Sprintf("keepalive_L%d", leases) }

// names returns n lease names prefix.0 ... prefix.(n-1).
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s.%d", prefix, i)
	}
	return out
}

// newSimba returns a client of b that the suite closes.
func newSimba(su *suite, b simba.Backend, opts ...simba.Option) (*simba.Client, error) {
	c, err := simba.New(b, opts...)
	if err != nil {
		return nil, err
	}
	su.onClose(func() error { return closeClient(c) })
	return c, nil
}

func closeClient(c *simba.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Close(ctx)
}

// simbaLockOp returns the measured operation of Simba's lock: worker w
// acquires the lock names[w] and releases it, on one client of b.
func simbaLockOp(su *suite, b simba.Backend, names []string) (opFunc, error) {
	return simbaLock(su, b, names, false)
}

// simbaAsyncImpl is Simba's lock given back with ReleaseAsync (impl
// "simba_async"): the caller does not wait for the release's answer, and
// its next Acquire goes out while the release is still on its way.
func simbaAsyncImpl(open func() (simba.Backend, error), su *suite) impl {
	return impl{implSimbaAsync, func(ns []string) (opFunc, error) {
		b, err := open()
		if err != nil {
			return nil, err
		}
		return simbaLock(su, b, ns, true)
	}}
}

func simbaLock(su *suite, b simba.Backend, names []string, async bool) (opFunc, error) {
	c, err := newSimba(su, b)
	if err != nil {
		return nil, err
	}
	locks := make([]*simba.Lock, len(names))
	for i, n := range names {
		locks[i] = c.Lock(n)
	}
	return func(ctx context.Context, w int) error {
		lt, err := locks[w].Acquire(ctx)
		if err != nil {
			return err
		}
		if async {
			lt.ReleaseAsync()
			return nil
		}
		return lt.Release(ctx)
	}, nil
}

// backendFloorOp returns the backend's own acquire and release on one
// session, without the engine: what the engine adds is the difference.
func backendFloorOp(ctx context.Context, b simba.Backend, names []string) (opFunc, error) {
	g, err := b.OpenSession(ctx, time.Hour)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, w int) error {
		r, err := b.Acquire(ctx, g.ID, names[w])
		if err != nil {
			return err
		}
		if !r.Won {
			return fmt.Errorf("acquire %s: held elsewhere", names[w])
		}
		return b.Release(ctx, g.ID, names[w], r.Token)
	}, nil
}

// spiImpl is the backend's own Acquire and Release called directly on one
// session (impl "spi"): the line beside Simba's shows what the engine
// adds on that backend. Its names are apart from the engine's.
func spiImpl(ctx context.Context, open func() (simba.Backend, error)) impl {
	return impl{implSPI, func(ns []string) (opFunc, error) {
		b, err := open()
		if err != nil {
			return nil, err
		}
		own := make([]string, len(ns))
		for i, n := range ns {
			own[i] = "spi." + n
		}
		return backendFloorOp(ctx, b, own)
	}}
}

// opAcquireMany names the acquire+release operation of n goroutines at
// once, each on a lock name of its own (n > 1).
func opAcquireMany(n int) string { return fmt.Sprintf("%s_c%d", opAcquireRelease, n) }

// lockCases returns the acquire+release case of im with one worker and,
// when many > 1, the one with many workers each on a name of its own.
func (s *settings) lockCases(backend string, many int, im impl) ([]benchCase, error) {
	type shape struct {
		op      string
		workers int
	}
	shapes := []shape{{opAcquireRelease, 1}}
	if many > 1 {
		shapes = append(shapes, shape{opAcquireMany(many), many})
	}
	var out []benchCase
	for _, sh := range shapes {
		f, err := im.mk(names(sh.op, sh.workers))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", im.name, sh.op, err)
		}
		out = append(out, &loop{
			lid: lineID{backend, im.name, sh.op}, workers: sh.workers,
			dur: s.duration, warmup: s.warmup, op: f,
		})
	}
	return out, nil
}

// impl is one implementation of a lock: mk builds its operation for a
// set of names, one per worker.
type impl struct {
	name string
	mk   func(names []string) (opFunc, error)
}

// implCases returns the lock cases of every implementation, in order:
// with one worker and, when many > 1, with many workers.
func (s *settings) implCases(backend string, many int, impls []impl) ([]benchCase, error) {
	var out []benchCase
	for _, im := range impls {
		cs, err := s.lockCases(backend, many, im)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// parallel runs f(ctx, i) for i in [0, n) on up to workers goroutines and
// returns the first error; the others stop taking new indexes then.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		failed   atomic.Bool
		wg       sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(ctx, i); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// setupWorkers is how many goroutines take or give back the leases of a
// keep-alive measurement.
const setupWorkers = 32

// countingBackend counts the keep-alives the engine sends.
type countingBackend struct {
	simba.Backend
	keepAlives atomic.Int64
}

func (b *countingBackend) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	b.keepAlives.Add(1)
	return b.Backend.KeepAlive(ctx, s, req)
}

// counter reads a count that only grows (requests sent, commands run).
type counter func(ctx context.Context) (int64, error)

// rates reads every counter, waits d, reads them again and returns each
// one's increase per second of the time between the readings.
func rates(ctx context.Context, d time.Duration, cs ...counter) ([]float64, error) {
	read := func() ([]int64, time.Time, error) {
		v := make([]int64, len(cs))
		for i, c := range cs {
			n, err := c(ctx)
			if err != nil {
				return nil, time.Time{}, err
			}
			v[i] = n
		}
		return v, time.Now(), nil
	}
	v0, t0, err := read()
	if err != nil {
		return nil, err
	}
	if err := wait.Sleep(ctx, d); err != nil {
		return nil, err
	}
	v1, t1, err := read()
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(cs))
	for i := range cs {
		out[i] = float64(v1[i]-v0[i]) / t1.Sub(t0).Seconds()
	}
	return out, nil
}

// atomicCounter adapts an atomic count to a counter.
func atomicCounter(n *atomic.Int64) counter {
	return func(context.Context) (int64, error) { return n.Load(), nil }
}

// kaBackend is a backend opened for one keep-alive measurement, with the
// request counter of its own client.
type kaBackend struct {
	b     simba.Backend
	wire  *wire
	close func() error
}

// keepAliveConfig is the timing of every keep-alive measurement: renewal
// every renew, lease three times that.
func keepAliveConfig(renew time.Duration) simba.Config {
	return simba.Config{LeaseDuration: 3 * renew, RenewInterval: renew}
}

// simbaKeepAlive measures the cost of keeping one Simba client holding
// leases locks alive: keep-alives per second (ops_s), requests per second
// on the wire and, when server is set, commands per second the server
// ran (calls_s, else the wire count). Its latencies are those of the
// backend's KeepAlive timed directly, with all the leases held.
type simbaKeepAlive struct {
	lid    lineID
	s      *settings
	leases int
	open   func(ctx context.Context) (kaBackend, error)
	server counter // nil: calls_s is the wire count
}

func (k *simbaKeepAlive) id() lineID { return k.lid }

func (k *simbaKeepAlive) round(ctx context.Context) (_ sample, err error) {
	kb, err := k.open(ctx)
	if err != nil {
		return sample{}, err
	}
	defer func() { err = errors.Join(err, kb.close()) }()
	cb := &countingBackend{Backend: kb.b}
	cfg := keepAliveConfig(k.s.renew)
	c, err := simba.New(cb, simba.WithConfig(cfg))
	if err != nil {
		return sample{}, err
	}
	defer func() { err = errors.Join(err, closeClient(c)) }()
	ns := names("ka", k.leases)
	if err := parallel(ctx, len(ns), setupWorkers, func(ctx context.Context, i int) error {
		_, err := c.Lock(ns[i]).Acquire(ctx)
		return err
	}); err != nil {
		return sample{}, fmt.Errorf("take %d leases: %w", k.leases, err)
	}
	counters := []counter{atomicCounter(&cb.keepAlives), kb.wire.count}
	if k.server != nil {
		counters = append(counters, k.server)
	}
	r, err := rates(ctx, k.s.window, counters...)
	if err != nil {
		return sample{}, err
	}
	lats, err := timeKeepAlives(ctx, kb.b, c.Snapshot(), cfg.LeaseDuration, k.s.kaTimings)
	if err != nil {
		return sample{}, err
	}
	s := sample{opsS: r[0]}
	s.p50, s.p99 = latencies(lats)
	if k.server != nil {
		s.extra = []metric{{"calls_s", r[2]}, {"wire_s", r[1]}}
	} else {
		s.extra = []metric{{"calls_s", r[1]}}
	}
	return s, nil
}

// timeKeepAlives times n KeepAlive calls of the session of snap on b,
// sending the leases snap holds as the engine does, and checks that no
// reply reports one lost.
func timeKeepAlives(ctx context.Context, b simba.Backend, snap simba.Snapshot, lease time.Duration, n int) ([]time.Duration, error) {
	if snap.Session.ID == "" {
		return nil, errors.New("the client has no session")
	}
	req := simba.KeepAliveRequest{Lease: lease, Held: make(map[string]uint64, len(snap.Leases)), Generation: 1}
	for _, l := range snap.Leases {
		if l.Token != 0 {
			req.Held[l.Name] = l.Token
		}
	}
	lats := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		r, err := b.KeepAlive(ctx, snap.Session.ID, req)
		if err != nil {
			return nil, fmt.Errorf("keep-alive: %w", err)
		}
		lats = append(lats, time.Since(t))
		if len(r.Lost) != 0 {
			return nil, fmt.Errorf("keep-alive reported %d of %d leases held lost", len(r.Lost), len(req.Held))
		}
	}
	return lats, nil
}

// handover measures a clean handover: side A holds the lease, side B waits
// for it (its candidate or watcher is set up during settle), A releases,
// and the time from the start of A's release to B's win is one sample.
// The sides then swap. ops_s is one over the mean handover time.
type handover struct {
	lid     lineID
	s       *settings
	acquire func(ctx context.Context, side int) (release func(context.Context) error, err error)
	warm    bool
}

func (h *handover) id() lineID { return h.lid }

type won struct {
	release func(context.Context) error
	err     error
	at      time.Time
}

func (h *handover) round(ctx context.Context) (_ sample, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.s.handovers+1)*(h.s.settle+opGrace))
	defer cancel()
	holder := 0
	release, err := h.acquire(ctx, holder)
	if err != nil {
		return sample{}, err
	}
	defer func() {
		if release != nil {
			err = errors.Join(err, release(ctx))
		}
	}()
	n := h.s.handovers
	if !h.warm {
		n++ // the first handover dials watch connections: not measured
	}
	var lats []time.Duration
	for i := range n {
		waiter := 1 - holder
		done := make(chan won, 1)
		go func() {
			rel, err := h.acquire(ctx, waiter)
			done <- won{rel, err, time.Now()}
		}()
		if err := wait.Sleep(ctx, h.s.settle); err != nil {
			return sample{}, err
		}
		select {
		case w := <-done:
			if w.release != nil {
				_ = w.release(ctx)
			}
			err := fmt.Errorf("side %d won while side %d held the lease", waiter, holder)
			if w.err != nil {
				err = fmt.Errorf("side %d ended while side %d held the lease: %w", waiter, holder, w.err)
			}
			return sample{}, err
		default:
		}
		t0 := time.Now()
		rerr := release(ctx)
		release = nil
		w := <-done
		if err := errors.Join(rerr, w.err); err != nil {
			if w.release != nil {
				release = w.release
			}
			return sample{}, err
		}
		release, holder = w.release, waiter
		if h.warm || i > 0 {
			lats = append(lats, w.at.Sub(t0))
		}
	}
	h.warm = true
	var sum time.Duration
	for _, d := range lats {
		sum += d
	}
	s := sample{opsS: float64(len(lats)) / sum.Seconds()}
	s.p50, s.p99 = latencies(slices.Clone(lats))
	return s, nil
}

// simbaHandover returns the handover case of Simba between two clients,
// one on each backend.
func simbaHandover(su *suite, s *settings, backend string, a, b simba.Backend) (benchCase, error) {
	var locks [2]*simba.Lock
	for i, be := range []simba.Backend{a, b} {
		c, err := newSimba(su, be)
		if err != nil {
			return nil, err
		}
		locks[i] = c.Lock("handover")
	}
	return &handover{
		lid: lineID{backend, implSimba, opHandover}, s: s,
		acquire: func(ctx context.Context, side int) (func(context.Context) error, error) {
			lt, err := locks[side].Acquire(ctx)
			if err != nil {
				return nil, err
			}
			return lt.Release, nil
		},
	}, nil
}
