// Command example runs one Simba node on the in-memory backend and serves
// its metrics on /metrics and its snapshot on /simba, for -duration, so
// that Prometheus (or curl) has something to look at. The node leads the
// election "report", runs the four partitions of the group "jobs", and two
// workers take turns on the lock "invoice", so acquisitions wait.
//
//	go run ./metrics/example                          # http://127.0.0.1:9464 for one minute
//	go run ./metrics/example -listen :9464 -duration 10m
//	curl -s localhost:9464/metrics | grep ^simba_
//	curl -s localhost:9464/simba
//
// It stops at the end of -duration (at most 24h), on an interrupt or on
// SIGTERM (what Kubernetes and systemd send), closing its client first, which
// releases its leases.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
	simbametrics "github.com/simba-go/simba/metrics"
)

// maxDuration bounds -duration: the example is a demo, not a service.
const maxDuration = 24 * time.Hour

// settings are the command line of the example.
type settings struct {
	listen   string
	duration time.Duration
}

func main() {
	var s settings
	flag.StringVar(&s.listen, "listen", "127.0.0.1:9464", "address to serve /metrics and /simba on")
	flag.DurationVar(&s.duration, "duration", time.Minute, "how long to run, at most 24h")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, s, os.Stderr, func(addr net.Addr) {
		fmt.Printf("serving http://%s/metrics and http://%s/simba for %v\n", addr, addr, s.duration)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// run runs the node and serves it until ctx is done or s.duration has
// passed. ready is called with the address once the server listens. logs
// gets the node's warnings and errors.
func run(ctx context.Context, s settings, logs io.Writer, ready func(net.Addr)) error {
	if s.duration <= 0 || s.duration > maxDuration {
		return fmt.Errorf("-duration %v: want more than 0 and at most %v", s.duration, maxDuration)
	}
	ctx, cancel := context.WithTimeout(ctx, s.duration)
	defer cancel()

	col, err := simbametrics.New()
	if err != nil {
		return err
	}
	client, err := simba.New(memory.New().Connect(),
		simba.WithConfig(simba.Config{LeaseDuration: 6 * time.Second}),
		simba.WithIdentity("example"),
		simba.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		simba.WithEventListener(col.Observe))
	if err != nil {
		return err
	}
	col.Attach(client)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col, collectors.NewGoCollector())

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/simba", simbametrics.SnapshotHandler(client))
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		_ = client.Close(context.Background())
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ready(ln.Addr())

	var wg sync.WaitGroup
	wg.Go(func() {
		_ = client.Election("report").RunWhileLeader(ctx, func(ctx context.Context, _ *simba.Term) error {
			<-ctx.Done()
			return nil
		})
	})
	wg.Go(func() {
		_ = client.Group("jobs", 4).Run(ctx, func(ctx context.Context, _ int, _ *simba.Term) error {
			<-ctx.Done()
			return nil
		})
	})
	for range 2 {
		wg.Go(func() { invoices(ctx, client.Lock("invoice")) })
	}

	<-ctx.Done()
	wg.Wait()
	shut, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShut()
	errs := []error{srv.Shutdown(shut), client.Close(shut)}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// invoices holds the lock for 300ms every 500ms until ctx is done; two
// workers on one lock wait for each other.
func invoices(ctx context.Context, l *simba.Lock) {
	for ctx.Err() == nil {
		lt, err := l.Acquire(ctx)
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		sleep(ctx, 300*time.Millisecond)
		_ = lt.Release(context.WithoutCancel(ctx))
		sleep(ctx, 200*time.Millisecond)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
