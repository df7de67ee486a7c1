// Command example is a small service built with fx and fxsimba, run as a
// few nodes in one process so that one terminal shows who runs what. Each
// node is an fx app of its own with its own connection to one lease store:
// two scheduled jobs ("report" every second, "cleanup" every 1.5s) run on
// the leader of their lease only, and a partitioned worker spreads four
// shards over the nodes. Halfway through, the first node stops: its jobs
// and shards move to the others, each after its work exited (the ordered
// handover). At the end, or on an interrupt or SIGTERM, every node stops.
//
//	go run ./fxsimba/example                        # 3 nodes on the in-memory backend, for 5s
//	go run ./fxsimba/example -nodes 2 -duration 10s
//	go run ./fxsimba/example -redis redis://127.0.0.1:6379/0
//
// The session timing comes from the SIMBA_SESSION_* variables
// (fxsimba.ConfigFromEnv); -lease is the lease duration when
// SIMBA_SESSION_LEASE_DURATION is not set. A real service has one node per
// process and calls app.Run instead of Start and Stop.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	simbaredis "github.com/simba-go/simba/backend-redis"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	"github.com/simba-go/simba/fxsimba"
	"go.uber.org/fx"
)

// settings are the command line of the example.
type settings struct {
	nodes    int
	duration time.Duration
	lease    time.Duration
	redisURL string    // empty: the in-memory backend
	logs     io.Writer // warnings and errors of the nodes
}

func main() {
	s := settings{logs: os.Stderr}
	flag.IntVar(&s.nodes, "nodes", 3, "number of nodes, each an fx app of its own")
	flag.DurationVar(&s.duration, "duration", 5*time.Second, "how long the nodes run")
	flag.DurationVar(&s.lease, "lease", 3*time.Second, "session lease duration, unless SIMBA_SESSION_LEASE_DURATION is set")
	flag.StringVar(&s.redisURL, "redis", "", "run on this Redis server (redis://host:port/db) instead of in memory")
	flag.Parse()

	// SIGTERM is what Kubernetes and systemd send: caught, every node stops
	// its app and hands its leases over before the process exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo(ctx, os.Stdout, s); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// demo runs the nodes for s.duration (or until ctx ends), stopping the
// first one halfway, and prints what each node does to out.
func demo(ctx context.Context, out io.Writer, s settings) error {
	if s.nodes < 1 {
		return errors.New("want at least one node")
	}
	p := &printer{out: out, start: time.Now()}
	where := "in memory"
	if s.redisURL != "" {
		where = "on Redis"
	}
	p.printf("", "%d nodes %s for %v", s.nodes, where, s.duration)

	backend := memoryBackend(memory.New())
	if s.redisURL != "" {
		backend = redisBackend(s.redisURL)
	}
	apps := make([]*fx.App, 0, s.nodes)
	stopAll := func(from int) error {
		var errs []error
		for i := from; i < len(apps); i++ {
			errs = append(errs, stopNode(p, apps[i], nodeName(i)))
		}
		return errors.Join(errs...)
	}
	for i := range s.nodes {
		name := nodeName(i)
		app := fx.New(nodeOptions(name, s, p, backend)...)
		startCtx, cancel := context.WithTimeout(ctx, app.StartTimeout())
		err := app.Start(startCtx) // returns at once: the session opens in the background
		cancel()
		if err != nil {
			return errors.Join(fmt.Errorf("%s: %w", name, err), stopAll(0))
		}
		p.printf(name, "started")
		apps = append(apps, app)
	}

	if s.nodes == 1 {
		sleep(ctx, s.duration)
		return stopAll(0)
	}
	sleep(ctx, s.duration/2)
	if err := stopNode(p, apps[0], nodeName(0)); err != nil {
		return errors.Join(err, stopAll(1))
	}
	sleep(ctx, s.duration-s.duration/2)
	return stopAll(1)
}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i+1) }

// nodeOptions is the whole fx graph of one node: what a service's main
// passes to fx.New.
func nodeOptions(name string, s settings, p *printer, backend func(node string) fx.Option) []fx.Option {
	log := slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", name)
	return []fx.Option{
		fx.NopLogger,
		fx.Supply(log),
		backend(name),
		fx.Provide(func() (simba.Config, error) { return config(s.lease) }),
		fxsimba.Options,

		fxsimba.AsScheduled("report", time.Second, func(_ context.Context, t *simba.Term) error {
			p.printf(name, "runs report (token %d)", t.Token())
			return nil
		}),
		fxsimba.AsScheduled("cleanup", 1500*time.Millisecond, func(_ context.Context, t *simba.Term) error {
			p.printf(name, "runs cleanup (token %d)", t.Token())
			return nil
		}),
		fxsimba.AsPartitioned("shards", 4, func(ctx context.Context, shard int, t *simba.Term) error {
			p.printf(name, "takes shard %d (token %d)", shard, t.Token())
			<-ctx.Done() // a real worker would consume the shard's queue until then
			p.printf(name, "gives shard %d up", shard)
			return nil
		}),
	}
}

// config reads the session timing from the environment, with lease as the
// lease duration when the environment does not set one.
func config(lease time.Duration) (simba.Config, error) {
	cfg, err := fxsimba.ConfigFromEnv()
	if err != nil {
		return cfg, err
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = lease
	}
	return cfg, nil
}

// memoryBackend gives each node its own connection to one in-memory store.
func memoryBackend(store *memory.Server) func(string) fx.Option {
	return func(string) fx.Option {
		return fx.Provide(func() simba.Backend { return store.Connect() })
	}
}

// redisBackend gives each node its own Redis backend, closed when the node
// stops (after the client: fx stops a constructor's dependencies last).
func redisBackend(url string) func(string) fx.Option {
	return func(string) fx.Option {
		return fx.Provide(func(lc fx.Lifecycle) (simba.Backend, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			b, err := simbaredis.Open(ctx, url, simbaredis.Options{KeyPrefix: "simba-example:"})
			if err != nil {
				return nil, err
			}
			lc.Append(fx.StopHook(b.Close))
			return b, nil
		})
	}
}

// stopNode stops one node's app, which hands its leases over first.
func stopNode(p *printer, app *fx.App, name string) error {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), app.StopTimeout())
	defer cancel()
	if err := app.Stop(ctx); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	p.printf(name, "stopped in %s", stopTime(time.Since(begin)))
	return nil
}

// stopTime rounds d to the millisecond, or to the microsecond below one
// millisecond: a node of the in-memory backend stops in well under a
// millisecond, which rounding to milliseconds would print as "0s".
func stopTime(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// printer prints one line per thing a node does, with the time since the
// start.
type printer struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func (p *printer) printf(node, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "%6.2fs  %-7s %s\n", time.Since(p.start).Seconds(), node, fmt.Sprintf(format, args...))
}
