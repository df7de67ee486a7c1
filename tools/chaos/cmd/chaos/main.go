// Command chaos runs the robustness suite on private servers and prints
// the summary table; with -report and -svg it also writes the figures.
//
//	go run ./cmd/chaos -profile soak -report ../../docs/reliability.md -svg ../../docs/reliability-failover.svg
//	go run ./cmd/chaos -profile topology -topology redis-single -report ../../docs/reliability.md
//
// The report rewrites only its own sections of the file: the soak's, and
// one per topology run.
//
// It exits 1 when a check fails or a run cannot complete, 2 on a usage
// error.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/report"
	"github.com/simba-go/simba/tools/chaos/internal/suite"
	"github.com/simba-go/simba/tools/chaos/internal/topology"
)

func main() {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	profile := fs.String("profile", "ci", "ci (500 handovers per backend), soak (10,000), topology (20 injections of each topology fault) or topology-short")
	topologies := fs.String("topology", "", "with -profile topology: comma-separated topologies (default: all of "+strings.Join(topology.Names(), ", ")+")")
	backends := fs.String("backends", strings.Join(suite.Backends, ","), "comma-separated: redis, postgres, mysql, zk")
	handovers := fs.Int("handovers", 0, "override the profile's handovers per backend")
	reportPath := fs.String("report", "", "write the Markdown report here")
	svgPath := fs.String("svg", "", "write the failover plot here")
	keep := fs.Bool("keep", false, "keep the histories and logs")
	faults := fs.String("faults", "", "comma-separated faults to inject (default: all); with a topology profile, the node faults mixed in (sigkill, sigstop; \"none\" for none)")
	maxDur := fs.Duration("max", 0, "override the profile's longest injection time per backend")
	locks := fs.Int("locks", -1, "override the profile's lock names")
	broken := fs.String("broken", "", "run every node with a deliberate bug: margin, revive or release")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	var p suite.Profile
	switch *profile {
	case "ci":
		p = suite.CI()
	case "soak":
		p = suite.Soak()
	case "topology":
		p = suite.Topology()
	case "topology-short":
		p = suite.TopologyShort()
	default:
		fmt.Fprintln(os.Stderr, "chaos: -profile must be ci, soak, topology or topology-short")
		os.Exit(2)
	}
	isTopology := strings.HasPrefix(p.Name, "topology")
	if *topologies != "" && !isTopology {
		fmt.Fprintln(os.Stderr, "chaos: -topology needs -profile topology")
		os.Exit(2)
	}
	if *maxDur > 0 {
		p.MaxDuration = *maxDur
	}
	if *handovers > 0 {
		p.Handovers = *handovers
	}
	p.Progress = os.Stderr
	p.Broken = *broken
	if *locks >= 0 {
		p.Locks = *locks
	}
	switch *faults {
	case "":
	case "none":
		p.Faults = nil
	default:
		p.Faults = strings.Split(*faults, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if isTopology {
		names := topology.Names()
		if *topologies != "" {
			names = strings.Split(*topologies, ",")
		}
		if err := runTopologies(ctx, p, names, *reportPath, *keep); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, p, strings.Split(*backends, ","), *reportPath, *svgPath, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

var errChecks = errors.New("checks failed")

// prepare finds the repository, makes the directory of the histories
// (named after prefix; kept when keep is set) and builds the node binary
// in it. cleanup removes the directory unless it is kept.
func prepare(ctx context.Context, prefix string, keep bool) (root, dir, bin string, cleanup func(), err error) {
	if root, err = suite.RepoRoot(); err != nil {
		return "", "", "", nil, err
	}
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", "", "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	if keep {
		fmt.Fprintln(os.Stderr, "histories in", dir)
		cleanup = func() {}
	}
	if bin, err = suite.BuildNode(ctx, root, dir); err != nil {
		cleanup()
		return "", "", "", nil, err
	}
	return root, dir, bin, cleanup, nil
}

func run(ctx context.Context, p suite.Profile, backends []string, reportPath, svgPath string, keep bool) error {
	root, dir, bin, cleanup, err := prepare(ctx, "simba-chaos-", keep)
	if err != nil {
		return err
	}
	defer cleanup()
	began := time.Now()
	var outs []*suite.Outcome
	failed := false
	for _, b := range backends {
		out, err := suite.Run(ctx, p, b, suite.Env{Dir: filepath.Join(dir, b), NodeBin: bin, RepoRoot: root})
		if err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		outs = append(outs, out)
		tot := out.Result.Total()
		fmt.Fprintf(os.Stderr, "%s: %d handovers in %v; %d permits of semaphores, at most %d valid at once\n", b, tot.Handovers,
			out.Duration.Round(time.Second), tot.PermitTerms, tot.MostPermits)
		for _, v := range out.Result.Violations {
			fmt.Fprintln(os.Stderr, "  VIOLATION", v)
			failed = true
		}
	}
	var table bytes.Buffer
	report.Table(&table, outs)
	fmt.Print(table.String())
	if reportPath != "" {
		if err := splice(reportPath, "soak", document(p, outs, table.String(), time.Since(began), svgPath, reportPath)); err != nil {
			return err
		}
	}
	if svgPath != "" {
		var svg bytes.Buffer
		report.SVG(&svg, outs, p.Timing().Bound())
		if err := os.WriteFile(svgPath, svg.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if failed {
		return errChecks
	}
	return nil
}

// splice rewrites the section key of the report at path (package
// report, Splice), keeping the rest of the file.
func splice(path, key, body string) error {
	doc, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(doc) == 0 {
		doc = []byte("# Reliability figures\n\n")
	}
	return os.WriteFile(path, []byte(report.Splice(string(doc), key, body)), 0o644)
}

// runTopologies starts each topology, runs p on it, stops it, and prints
// its table; with a report path, it rewrites the topology's section.
// A topology registered as unbuildable is reported with its error.
func runTopologies(ctx context.Context, p suite.Profile, names []string, reportPath string, keep bool) error {
	entries := make([]topology.Entry, 0, len(names))
	for _, n := range names {
		e, err := topology.Lookup(n)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	root, dir, bin, cleanup, err := prepare(ctx, "simba-chaos-topology-", keep)
	if err != nil {
		return err
	}
	defer cleanup()
	failed := false
	for _, e := range entries {
		if e.Unbuildable != "" {
			fmt.Fprintf(os.Stderr, "%s: not run, it cannot be built from Debian's packages: %s\n", e.Name, e.Unbuildable)
			if reportPath != "" {
				if err := splice(reportPath, "topology "+e.Name, report.UnbuildableSection(e.Name, e.Unbuildable, time.Now())); err != nil {
					return err
				}
			}
			continue
		}
		out, err := runTopology(ctx, p, e, suite.Env{Dir: filepath.Join(dir, e.Name), NodeBin: bin, RepoRoot: root})
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		fmt.Fprintf(os.Stderr, "%s: %d injections, %d handovers in %v\n", e.Name, out.Result.Total().Injections,
			out.Result.Total().Handovers, out.Duration.Round(time.Second))
		for _, v := range out.Result.Violations {
			fmt.Fprintln(os.Stderr, "  VIOLATION", v)
			failed = true
		}
		fmt.Printf("%s\n\n", e.Name)
		report.TopologyTable(os.Stdout, out)
		fmt.Println()
		if reportPath != "" {
			if err := splice(reportPath, "topology "+e.Name, report.TopologySection(out, p, time.Now())); err != nil {
				return err
			}
		}
	}
	if failed {
		return errChecks
	}
	return nil
}

// runTopology starts e's servers, runs p on them and stops them.
func runTopology(ctx context.Context, p suite.Profile, e topology.Entry, env suite.Env) (out *suite.Outcome, err error) {
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	topo, err := e.Start(startCtx, filepath.Join(env.Dir, "servers"))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	defer func() {
		downCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if derr := topo.Down(downCtx); derr != nil && err == nil {
			err = fmt.Errorf("down: %w", derr)
		}
	}()
	p.Progress = os.Stderr
	return suite.RunTopology(ctx, p, topo, env)
}

func document(p suite.Profile, outs []*suite.Outcome, table string, took time.Duration, svgPath, reportPath string) string {
	host, _ := os.Hostname()
	cpu := cpuModel()
	tm := p.Timing()
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by the robustness suite (`tools/chaos`, profile `%s`, `make %s`) on %s UTC,\n",
		p.Name, map[string]string{"ci": "chaos", "soak": "soak"}[p.Name], time.Now().UTC().Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, "host %s: %d CPUs (%s), %s/%s, %s; the run took %v. The machine was shared with other\n",
		host, runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, runtime.Version(), took.Round(time.Second))
	fmt.Fprintf(&b, "work, so the timing figures are those of a loaded machine.\n\n")
	fmt.Fprintf(&b, "Each backend ran on a private server of its own (started with `tools/testenv/lib.sh` on free ports),\n")
	fmt.Fprintf(&b, "with %d node processes contending for %d locks (%d goroutine(s) per lock and node, a pause of up to\n", p.Nodes, p.Locks, p.Workers)
	fmt.Fprintf(&b, "%v after each release) and %d election (the leader writes for %v per term), lease %v (renew %v,\n",
		p.Idle, p.Elections, 3*p.Lease, tm.Lease, tm.Renew.Round(time.Millisecond))
	fmt.Fprintf(&b, "retry jitter %v), and %d goroutines per node for the 2 permits of the semaphore sem-0. A lock's or\n", tm.Jitter.Round(time.Millisecond), p.Workers+1)
	fmt.Fprintf(&b, "permit's term writes 4 times to a fenced resource with its token.\n")
	fmt.Fprintf(&b, "Faults are injected in turn, each followed by %v to settle; a row counts the terms that began after\n", p.Lease+p.Lease/2)
	fmt.Fprintf(&b, "the fault was injected and before the next one. The crash bound (failover after SIGKILL) is\n")
	fmt.Fprintf(&b, "lease + renew/2 + jitter + %v slack = %v.", tm.Slack, tm.Bound().Round(time.Millisecond))
	violations := 0
	for _, o := range outs {
		violations += len(o.Result.Violations)
	}
	if violations > 0 {
		fmt.Fprintf(&b, " **%d checks failed** in this run.\n\n", violations)
	} else {
		fmt.Fprintf(&b, " No check failed. The overlaps after eviction are the\n")
		fmt.Fprintf(&b, "documented case of a session deleted under its node, which learns it at its next keep-alive\n")
		fmt.Fprintf(&b, "(bounded here by two renew intervals + %v); fencing refused those terms' late writes.\n\n", tm.Slack)
	}
	fmt.Fprintf(&b, "%s\n", table)
	total := 0
	for _, o := range outs {
		total += o.Result.Total().Handovers
	}
	permits, most := 0, 0
	for _, o := range outs {
		permits += o.Result.Total().PermitTerms
		most = max(most, o.Result.Total().MostPermits)
	}
	fmt.Fprintf(&b, "%d handovers in all; %d terms were permits of a semaphore of 2, at most %d of them valid at once.\n", total, permits, most)
	fmt.Fprintf(&b, "The columns: see [tools/chaos/README.md](../tools/chaos/README.md).\n")
	if svgPath != "" {
		rel, err := filepath.Rel(filepath.Dir(reportPath), svgPath)
		if err != nil {
			rel = svgPath
		}
		fmt.Fprintf(&b, "\n![Failover times per backend](%s)\n", rel)
	}
	return b.String()
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
