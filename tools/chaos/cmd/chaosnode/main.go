// Command chaosnode is one node of the robustness suite: a separate OS
// process that contends for locks, elections and the permits of
// semaphores on a backend opened by URL
// through the public API, writes to the suite's fenced resource with the
// token of each term it wins, and records every step in a history file
// (see package history).
//
// It runs until SIGTERM or SIGINT. Usage errors exit with 2, a backend
// that cannot be opened with 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/simba-go/simba/backend-jdbc/mysql"
	_ "github.com/simba-go/simba/backend-jdbc/postgres"
	_ "github.com/simba-go/simba/backend-redis"
	_ "github.com/simba-go/simba/backend-zk"
	simba "github.com/simba-go/simba/core"

	"github.com/simba-go/simba/tools/chaos/internal/broken"
	"github.com/simba-go/simba/tools/chaos/internal/fence"
	"github.com/simba-go/simba/tools/chaos/internal/history"
	"github.com/simba-go/simba/tools/internal/wait"
)

type options struct {
	backend   string
	history   string
	fence     string
	node      string
	locks     int
	elections int
	sems      int
	permits   int
	workers   int
	writes    int
	gap       time.Duration
	idle      time.Duration
	lease     time.Duration
	hold      time.Duration
	broken    string
}

func main() {
	var o options
	fs := flag.NewFlagSet("chaosnode", flag.ContinueOnError)
	fs.StringVar(&o.backend, "backend", "", "backend URL (redis://, postgres://, mysql://, zk://)")
	fs.StringVar(&o.history, "history", "", "history file to append to")
	fs.StringVar(&o.fence, "fence", "", "unix socket of the fenced resource")
	fs.StringVar(&o.node, "node", "", "node name in the history")
	fs.IntVar(&o.locks, "locks", 4, "lock names lock-0 .. lock-N-1 to contend for")
	fs.IntVar(&o.elections, "elections", 1, "election names leader-0 .. leader-N-1 to contend for")
	fs.IntVar(&o.sems, "semaphores", 1, "semaphore names sem-0 .. sem-N-1 to contend for, each by workers+1 goroutines")
	fs.IntVar(&o.permits, "permits", 2, "permits of each semaphore")
	fs.IntVar(&o.workers, "workers", 2, "goroutines contending for each lock name")
	fs.IntVar(&o.writes, "writes", 4, "fenced writes per term")
	fs.DurationVar(&o.gap, "gap", 5*time.Millisecond, "pause between two writes of a term")
	fs.DurationVar(&o.idle, "idle", 30*time.Millisecond, "longest random pause after a release")
	fs.DurationVar(&o.lease, "lease", time.Second, "lease duration")
	fs.DurationVar(&o.hold, "hold", 1500*time.Millisecond, "how long a leader keeps writing in each term of an election")
	fs.StringVar(&o.broken, "broken", "", "deliberate bug: margin, revive or release (self-test only)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if o.backend == "" || o.history == "" || o.fence == "" || o.node == "" || o.locks < 0 || o.elections < 0 || o.sems < 0 ||
		o.locks+o.elections+o.sems == 0 || o.permits < 1 || o.workers < 1 || o.writes < 1 || o.lease <= 0 {
		fmt.Fprintln(os.Stderr, "chaosnode: need -backend, -history, -fence, -node, at least one name, -permits >= 1, -workers >= 1, -writes >= 1, -lease > 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "chaosnode:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	h, err := history.Create(o.history, o.node)
	if err != nil {
		return err
	}
	defer h.Close()

	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	b, err := simba.OpenBackend(openCtx, o.backend)
	cancel()
	if err != nil {
		return fmt.Errorf("open backend: %w", err)
	}
	defer b.Close()
	wb, err := broken.Wrap(b, broken.Mode(o.broken))
	if err != nil {
		return err
	}

	cfg := simba.Config{LeaseDuration: o.lease}
	if o.broken == string(broken.Margin) {
		cfg.NoMargin, cfg.NoDrift = true, true
	}
	client, err := simba.New(wb, simba.WithConfig(cfg), simba.WithEventListener(func(_ context.Context, e simba.Event) {
		if e.Kind == simba.EventSessionOpened {
			h.Add(history.Record{Kind: history.KindSession, Session: string(e.Session)})
		}
	}))
	if err != nil {
		return err
	}
	h.Add(history.Record{Kind: history.KindReady})

	n := &node{o: o, h: h, client: client}
	var wg sync.WaitGroup
	for i := range o.locks {
		for range o.workers {
			w, err := n.newWriter(ctx, fmt.Sprintf("lock-%d", i))
			if err != nil {
				return err
			}
			wg.Go(func() { w.lockLoop(ctx) })
		}
	}
	for i := range o.sems {
		for range o.workers + 1 {
			w, err := n.newWriter(ctx, fmt.Sprintf("sem-%d", i))
			if err != nil {
				return err
			}
			wg.Go(func() { w.lockLoop(ctx) })
		}
	}
	for i := range o.elections {
		w, err := n.newWriter(ctx, fmt.Sprintf("leader-%d", i))
		if err != nil {
			return err
		}
		wg.Go(func() { w.electionLoop(ctx) })
	}
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return client.Close(closeCtx)
}

type node struct {
	o      options
	h      *history.Writer
	client *simba.Client
}

// writer contends for one name and writes to the resource with the token
// of each term it wins. Each writer has its own resource connection.
type writer struct {
	*node
	name string
	fc   *fence.Client
}

func (n *node) newWriter(ctx context.Context, name string) (*writer, error) {
	fc, err := fence.Dial(ctx, n.o.fence, n.o.node)
	if err != nil {
		return nil, err
	}
	return &writer{node: n, name: name, fc: fc}, nil
}

// lockLoop acquires the lock (or a permit of the semaphore, for a name
// sem-i), writes, releases, idles, and again, until ctx ends.
func (w *writer) lockLoop(ctx context.Context) {
	defer w.fc.Close()
	var lock interface {
		Acquire(context.Context) (*simba.LockTerm, error)
	} = w.client.Lock(w.name)
	if strings.HasPrefix(w.name, "sem-") {
		lock = w.client.Semaphore(w.name, w.o.permits)
	}
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 20*w.o.lease)
		asked := history.Mono()
		lt, err := lock.Acquire(actx)
		cancel()
		if err != nil {
			_ = wait.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		w.term(ctx, lt.Term, 0, asked)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.o.lease)
		_ = lt.Release(rctx) // a failed release leaves the lease to expire
		cancel()
		_ = wait.Sleep(ctx, rand.N(w.o.idle+1))
	}
}

// electionLoop leads the election for a few writes per term, and again,
// until ctx ends.
func (w *writer) electionLoop(ctx context.Context) {
	defer w.fc.Close()
	el := w.client.Election(w.name)
	for ctx.Err() == nil {
		err := el.RunWhileLeader(ctx, func(wctx context.Context, t *simba.Term) error {
			w.term(wctx, t, w.o.hold, 0)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			_ = wait.Sleep(ctx, 50*time.Millisecond)
		}
		_ = wait.Sleep(ctx, rand.N(w.o.idle+1))
	}
}

// term records the start of t, makes the writes of the term (-writes of
// them, and more until hold has passed) while the term stays valid, and
// records the end: the moment from which this node no longer counts on t.
func (w *writer) term(ctx context.Context, t *simba.Term, hold time.Duration, asked int64) {
	t0 := history.Mono()
	rem := t.Remaining()
	start := history.Record{Kind: history.KindStart, Name: t.Name(), Token: t.Token(), Session: string(t.Session()),
		Deadline: t0 + int64(rem)}
	if t.Name() != w.name {
		start.Permits, start.Asked = w.o.permits, asked
	}
	w.h.Add(start)
	reason := "released"
	until := time.Now().Add(hold)
	for i := 0; ; i++ {
		if !w.write(t) {
			break
		}
		if i+1 >= w.o.writes && !time.Now().Before(until) {
			break
		}
		if !sleepUntilEnd(ctx, t, w.o.gap) {
			break
		}
	}
	if r := t.Reason(); r != simba.NotRevoked {
		reason = r.String()
	} else if !t.Valid() {
		reason = "DEADLINE_SEEN"
	}
	w.h.Add(history.Record{Kind: history.KindEnd, Name: t.Name(), Token: t.Token(), Reason: reason})
}

// write sends one fenced write if the term is valid. The deadline recorded
// with it is what the term said just before the record; a write whose
// validity check and record are split by a pause longer than the time
// left is not sent.
func (w *writer) write(t *simba.Term) bool {
	t0 := history.Mono()
	rem := t.Remaining()
	t1 := history.Mono()
	if rem <= 0 || t1 >= t0+int64(rem) {
		return false
	}
	w.h.Add(history.Record{T: t1, Kind: history.KindWrite, Name: t.Name(), Token: t.Token(), Deadline: t0 + int64(rem)})
	err := w.fc.Write(t.Name(), t.Token())
	rec := history.Record{Kind: history.KindResult, Name: t.Name(), Token: t.Token(), OK: err == nil}
	if err != nil && !errors.Is(err, fence.ErrRefused) {
		rec.Err = err.Error()
	}
	w.h.Add(rec)
	return true
}

// sleepUntilEnd waits d and reports true, or false when t or ctx ended first.
func sleepUntilEnd(ctx context.Context, t *simba.Term, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-t.Done():
		return false
	case <-ctx.Done():
		return false
	}
}
