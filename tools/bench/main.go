// Command bench measures Simba's locks side by side with the Go libraries
// a user would otherwise pick, on the same servers, in one run.
//
// For every backend it finds a server for (SIMBA_TEST_REDIS_URL,
// SIMBA_TEST_POSTGRES_URL, SIMBA_TEST_MYSQL_URL, SIMBA_TEST_ZK_SERVERS; the
// in-memory backend needs none) it runs rounds of every implementation in
// turn, A B C A B C ..., so that a noisy machine disturbs them alike, and
// prints one line per measurement with the medians over the rounds:
//
//	bench backend=redis impl=simba op=acquire_release ops_s=5120 p50_us=180 p99_us=410
//
// Keep-alive lines add calls_s (and wire_s on Redis). A backend whose
// variable is not set is skipped with a note on stderr; progress and
// errors go to stderr too, so stdout holds only the lines. The exit status
// is 1 when a measurement failed. BENCH_QUICK=1 shortens everything so a
// run with all four servers stays under two minutes. See README.md for
// what each operation measures.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// settings are the knobs of one run.
type settings struct {
	backends  []string
	duration  time.Duration // one round of a throughput case
	warmup    time.Duration // unmeasured, before the first round of a case
	rounds    int           // rounds of the throughput and handover cases
	window    time.Duration // keep-alive counting window
	kaRounds  int           // rounds of the keep-alive cases
	leases    []int         // lease counts of the keep-alive cases
	renew     time.Duration // renew interval of the keep-alive cases
	kaTimings int           // KeepAlive calls timed per keep-alive round
	handovers int           // handovers timed per round
	waiters   []int         // nodes waiting on one lock in the handover_w<n> cases
	names     int           // distinct names of the state_names<n> case on Redis
	sqlNames  int           // distinct names of the state_names<n> case on SQL (a commit per name)
	listHeld  int           // leases held in the list_page100_held<n> case
	settle    time.Duration // wait before a release, for the waiter to set its watch
	svg       string        // file the ratio chart is written to, or ""
	cpuprof   string        // file the CPU profile of the run is written to, or ""
	out, log  io.Writer     // lines; progress, skips and errors
}

// allBackends lists the backends in the order they run.
var allBackends = []string{"memory", "redis", "postgres", "mysql", "zk"}

// defaultSettings returns the full run, or the short one when quick.
func defaultSettings(quick bool) settings {
	s := settings{
		backends:  allBackends,
		duration:  2 * time.Second,
		warmup:    500 * time.Millisecond,
		rounds:    5,
		window:    30 * time.Second,
		kaRounds:  2,
		leases:    []int{1, 100, 10000, 100000},
		renew:     time.Second,
		kaTimings: 30,
		handovers: 10,
		waiters:   []int{1, 10, 100},
		names:     1_000_000,
		sqlNames:  100_000,
		listHeld:  10_000,
		settle:    200 * time.Millisecond,
		out:       os.Stdout,
		log:       os.Stderr,
	}
	if quick {
		s.duration = 300 * time.Millisecond
		s.warmup = 100 * time.Millisecond
		s.rounds = 3
		s.window = 5 * time.Second
		s.kaRounds = 1
		s.kaTimings = 10
		s.handovers = 3
		s.names = 100_000
		s.sqlNames = 10_000
		s.listHeld = 1_000
		s.settle = 150 * time.Millisecond
	}
	return s
}

// parseFlags reads the command line over the defaults of the mode.
func parseFlags(args []string, quick bool, stderr io.Writer) (settings, error) {
	s := defaultSettings(quick)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backends := fs.String("backends", strings.Join(s.backends, ","), "comma-separated backends to run: "+strings.Join(allBackends, ", "))
	fs.DurationVar(&s.duration, "duration", s.duration, "length of one round of a throughput measurement")
	fs.IntVar(&s.rounds, "rounds", s.rounds, "rounds of the throughput and handover measurements (interleaved)")
	fs.DurationVar(&s.window, "window", s.window, "counting window of a keep-alive measurement")
	fs.IntVar(&s.kaRounds, "ka-rounds", s.kaRounds, "rounds of the keep-alive measurements (interleaved)")
	leases := fs.String("leases", joinInts(s.leases), "comma-separated lease counts of the keep-alive measurements")
	fs.IntVar(&s.listHeld, "list-held", s.listHeld, "leases held in the listing measurement")
	fs.StringVar(&s.svg, "svg", "", "write an SVG chart of Simba's ratios to the other implementations to this file")
	fs.StringVar(&s.cpuprof, "cpuprofile", "", "write a CPU profile of the whole run (go tool pprof) to this file")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	s.backends = nil
	for b := range strings.SplitSeq(*backends, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		if !slices.Contains(allBackends, b) {
			return s, fmt.Errorf("-backends: unknown backend %q (known: %s)", b, strings.Join(allBackends, ", "))
		}
		s.backends = append(s.backends, b)
	}
	var err error
	if s.leases, err = parseInts(*leases); err != nil {
		return s, fmt.Errorf("-leases: %w", err)
	}
	switch {
	case s.duration <= 0:
		return s, errors.New("-duration must be positive")
	case s.window <= 0:
		return s, errors.New("-window must be positive")
	case s.rounds < 1 || s.kaRounds < 1:
		return s, errors.New("-rounds and -ka-rounds must be at least 1")
	case s.listHeld < 1:
		return s, errors.New("-list-held must be at least 1")
	}
	s.warmup = min(s.warmup, s.duration)
	return s, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// suite is the benchmark of one backend: groups of cases run one after
// the other (the cases of a group interleaved), then the closers, last
// registered first.
type suite struct {
	groups  []group
	closers []func() error
}

func (su *suite) onClose(f func() error) { su.closers = append(su.closers, f) }

func (su *suite) close() error {
	var errs []error
	for _, f := range slices.Backward(su.closers) {
		errs = append(errs, f())
	}
	su.closers = nil
	return errors.Join(errs...)
}

// backendSpec says where a backend's server comes from and how its
// suite is built.
type backendSpec struct {
	envVar string // empty: no server needed
	build  func(ctx context.Context, s *settings, addr string, su *suite) error
}

var specs = map[string]backendSpec{
	"memory":   {"", memorySuite},
	"redis":    {"SIMBA_TEST_REDIS_URL", redisSuite},
	"postgres": {"SIMBA_TEST_POSTGRES_URL", postgresSuite},
	"mysql":    {"SIMBA_TEST_MYSQL_URL", mysqlSuite},
	"zk":       {"SIMBA_TEST_ZK_SERVERS", zkSuite},
}

// run benchmarks every backend of s that has a server, and returns the
// failures joined.
func run(ctx context.Context, s settings, getenv func(string) string) error {
	var errs []error
	for _, name := range s.backends {
		spec := specs[name]
		addr := ""
		if spec.envVar != "" {
			if addr = getenv(spec.envVar); addr == "" {
				fmt.Fprintf(s.log, "bench: %s skipped: %s is not set\n", name, spec.envVar)
				continue
			}
		}
		start := time.Now()
		fmt.Fprintf(s.log, "bench: %s ...\n", name)
		if err := runSuite(ctx, &s, name, spec, addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		fmt.Fprintf(s.log, "bench: %s done in %v\n", name, time.Since(start).Round(100*time.Millisecond))
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
	}
	return errors.Join(errs...)
}

func runSuite(ctx context.Context, s *settings, name string, spec backendSpec, addr string) (err error) {
	su := &suite{}
	defer func() {
		if cerr := su.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close: %w", cerr))
		}
	}()
	if err := spec.build(ctx, s, addr, su); err != nil {
		return fmt.Errorf("set-up: %w", err)
	}
	var errs []error
	for _, g := range su.groups {
		if err := interleave(ctx, g, s.out, s.log); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

func main() {
	quick := os.Getenv("BENCH_QUICK") != "" && os.Getenv("BENCH_QUICK") != "0"
	s, err := parseFlags(os.Args[1:], quick, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec := &lineRecorder{next: s.out}
	s.out = rec
	stopProfile, err := startCPUProfile(s.cpuprof)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	err = errors.Join(run(ctx, s, os.Getenv), stopProfile())
	if s.svg != "" {
		// The chart shows what was measured, even by a run that failed.
		err = errors.Join(err, saveChart(s, rec.String(), time.Now()))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: failed:", err)
		stop()
		os.Exit(1)
	}
}

// saveChart writes the ratio chart of lines to s.svg.
func saveChart(s settings, lines string, at time.Time) error {
	title := fmt.Sprintf("Simba side by side, %s, median of %d rounds of %v", at.UTC().Format("2006-01-02"), s.rounds, s.duration)
	var buf bytes.Buffer
	if err := writeChart(&buf, title, ratios(lines)); err != nil {
		return err
	}
	if err := os.WriteFile(s.svg, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("-svg: %w", err)
	}
	fmt.Fprintf(s.log, "bench: chart written to %s\n", s.svg)
	return nil
}

// startCPUProfile starts a CPU profile written to path, unless path is
// empty, and returns what stops it.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(fmt.Errorf("-cpuprofile: %w", err), f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
