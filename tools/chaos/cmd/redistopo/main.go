// Command redistopo measures Simba on a replicated Redis topology: it
// starts a Redis Sentinel or Redis Cluster topology on loopback (package
// topology), lets several clients contend for a few locks with short
// leases, injects faults one at a time, and prints a table per fault:
// how long the locks stayed unavailable, which terms ended and why, and
// how many tokens went back and by how much. It also measures what one
// acquire costs on the topology.
//
// Usage:
//
//	go run ./cmd/redistopo -topology sentinel -faults primary-kill=10,failover=10
//	go run ./cmd/redistopo -topology sentinel -faults empty-promotion=3
//	go run ./cmd/redistopo -topology cluster -faults primary-kill=5,failover=5
//
// Every server it started is stopped before it exits, also on SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	simbaredis "github.com/simba-go/simba/backend-redis"
	simba "github.com/simba-go/simba/core"

	"github.com/simba-go/simba/tools/chaos/internal/topology"
	"github.com/simba-go/simba/tools/internal/wait"
)

type options struct {
	topology string
	faults   []faultCount
	clients  int
	locks    int
	lease    time.Duration
	hold     time.Duration
	longHold time.Duration
	settle   time.Duration
	warmup   time.Duration
	cost     int
	dir      string
	open     string
	query    string
}

type faultCount struct {
	fault string
	n     int
}

func main() {
	var o options
	var faults string
	fs := flag.NewFlagSet("redistopo", flag.ContinueOnError)
	fs.StringVar(&o.topology, "topology", "sentinel", "sentinel or cluster")
	fs.StringVar(&faults, "faults", "primary-kill=1", "faults to inject, as fault=count, comma-separated, taken in turn; none: only the cost per acquire")
	fs.IntVar(&o.clients, "clients", 4, "clients (each its own connection and session)")
	fs.IntVar(&o.locks, "locks", 3, "lock names every client contends for")
	fs.DurationVar(&o.lease, "lease", time.Second, "lease duration")
	fs.DurationVar(&o.hold, "hold", 40*time.Millisecond, "how long a term is held before its release")
	fs.DurationVar(&o.longHold, "long-hold", 3*time.Second, "how long the terms of lock-0 are held (longer than a lease: the faults hit them while held)")
	fs.DurationVar(&o.settle, "settle", 3*time.Second, "contention after each fault before the next")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "contention before the first fault")
	fs.IntVar(&o.cost, "cost", 500, "acquires timed for the cost per acquire (0: none)")
	fs.StringVar(&o.dir, "dir", "", "state directory (default: a new temporary one)")
	fs.StringVar(&o.open, "open", "client", "how nodes open the backend: client (simbaredis.New over a go-redis client) or url (simbaredis.Open of the topology's URL)")
	fs.StringVar(&o.query, "query", "", "URL parameters added to the topology's URL with -open url, e.g. min_replicas=1")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	for f := range strings.SplitSeq(faults, ",") {
		if f == "none" {
			break
		}
		name, count, _ := strings.Cut(f, "=")
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "redistopo: bad fault count %q\n", f)
			os.Exit(2)
		}
		o.faults = append(o.faults, faultCount{strings.TrimSpace(name), n})
	}
	if o.topology != "sentinel" && o.topology != "cluster" || o.clients < 1 || o.locks < 1 || o.lease <= 0 {
		fmt.Fprintln(os.Stderr, "redistopo: need -topology sentinel|cluster, -clients >= 1, -locks >= 1, -lease > 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "redistopo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	dir := o.dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "simba-redistopo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	prefix := fmt.Sprintf("{simba-topo-%d}:", time.Now().UnixNano())
	topts := topology.RedisOptions{KeyPrefix: prefix}
	var topo *topology.Redis
	logf("starting %s in %s", o.topology, dir)
	if o.topology == "cluster" {
		topo, err = topology.StartRedisCluster(ctx, dir, topts)
	} else {
		topo, err = topology.StartRedisSentinel(ctx, dir, topts)
	}
	if err != nil {
		return err
	}
	defer func() {
		downCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if derr := topo.Down(downCtx); derr != nil && err == nil {
			err = derr
		}
	}()
	logf("%s up: %s", topo.Name(), topo.URL())

	open := func(ctx context.Context) (simba.Backend, func(), error) {
		return openBackend(ctx, topo, o, prefix)
	}
	if o.cost > 0 {
		c, err := acquireCost(ctx, open, o.cost)
		if err != nil {
			return fmt.Errorf("cost per acquire: %w", err)
		}
		fmt.Printf("cost per acquire on %s (%d acquires, one session): median %v, p99 %v\n",
			topo.Name(), o.cost, c.median, c.p99)
	}

	if len(o.faults) == 0 {
		return nil
	}
	rec := &recorder{}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, err := contend(runCtx, o, open, rec)
	if err != nil {
		return err
	}
	defer func() { cancel(); <-done }()

	if err := wait.Sleep(ctx, o.warmup); err != nil {
		return err
	}
	var windows []window
	for _, fc := range interleave(o.faults) {
		begin := time.Now()
		logf("injecting %s (%d so far)", fc, len(windows))
		if err := topo.Inject(ctx, fc); err != nil {
			return err
		}
		w := window{fault: fc, begin: begin, at: topo.FaultAt(), injected: time.Now()}
		if err := wait.Sleep(ctx, o.settle); err != nil {
			return err
		}
		w.end = time.Now()
		windows = append(windows, w)
	}
	cancel()
	<-done
	printReport(os.Stdout, topo.Name(), rec.all(), windows)
	return nil
}

// interleave takes the faults in turn until each ran its count.
func interleave(fcs []faultCount) []string {
	var out []string
	left := slices.Clone(fcs)
	for more := true; more; {
		more = false
		for i := range left {
			if left[i].n > 0 {
				out = append(out, left[i].fault)
				left[i].n--
				more = true
			}
		}
	}
	return out
}

// openBackend opens one node's backend on the topology: through the
// topology's URL with the run's key prefix, or through simbaredis.New over a go-redis failover or
// cluster client built here.
func openBackend(ctx context.Context, topo *topology.Redis, o options, prefix string) (simba.Backend, func(), error) {
	if o.open == "url" {
		u := topo.URL()
		if o.query != "" {
			u += "?" + o.query
		}
		b, err := simbaredis.Open(ctx, u, simbaredis.Options{KeyPrefix: prefix})
		if err != nil {
			return nil, nil, err
		}
		return b, func() { _ = b.Close() }, nil
	}
	var c redis.UniversalClient
	if topo.Name() == "redis-cluster" {
		c = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: topo.ClusterAddrs(), ContextTimeoutEnabled: true, DisableIdentity: true,
			DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		})
	} else {
		c = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: topo.Master(), SentinelAddrs: topo.SentinelAddrs(), ContextTimeoutEnabled: true, DisableIdentity: true,
			DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		})
	}
	b, err := simbaredis.New(c, simbaredis.Options{KeyPrefix: prefix})
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	return b, func() { _ = b.Close(); _ = c.Close() }, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "redistopo: %s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...)
}
