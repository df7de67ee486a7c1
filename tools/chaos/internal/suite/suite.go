// Package suite runs the robustness suite on one backend: it starts a
// private server, a fenced resource and a few node processes (each behind
// a fault proxy of its own), injects faults in turn until the profile's
// handovers and injections are reached, stops everything and checks the
// histories (package check). RunTopology does the same on a replicated
// topology (package topology), whose own faults it injects.
package suite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // the database/sql driver of the MariaDB faults
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"

	"github.com/simba-go/simba/tools/chaos/internal/check"
	"github.com/simba-go/simba/tools/chaos/internal/fence"
	"github.com/simba-go/simba/tools/chaos/internal/history"
	"github.com/simba-go/simba/tools/chaos/internal/proxy"
	"github.com/simba-go/simba/tools/chaos/internal/servers"
	"github.com/simba-go/simba/tools/chaos/internal/topology"
	"github.com/simba-go/simba/tools/internal/wait"
)

// ErrProfile is matched by the errors of Run about a profile or backend it
// cannot run.
var ErrProfile = errors.New("suite: invalid profile")

// ErrNodeDied is returned by Run when a node process exits on its own.
var ErrNodeDied = errors.New("suite: a node died")

// The faults, by the names the report uses.
const (
	SigStop   = "sigstop"   // a node paused with SIGSTOP past its lease, then SIGCONT
	SigKill   = "sigkill"   // a node killed with SIGKILL, started again at once
	BlackHole = "blackhole" // a node's connections hold every byte past its lease
	Slow      = "slow"      // a node's connections delay every chunk by a quarter lease
	ConnKill  = "connkill"  // the server kills the clients' connections (Zookeeper: the proxy resets them)
	Restart   = "restart"   // the server stopped and started again on its data
	Expire    = "expire"    // a node cut off (connections reset and refused) until the server expired its session
	Evict     = "evict"     // a node's session deleted on the server while it runs (Redis and SQL only)
)

// AllFaults is the order faults are injected in, round after round.
var AllFaults = []string{SigStop, SigKill, BlackHole, Slow, ConnKill, Restart, Expire, Evict}

// Backends are the kinds of server, as tools/testenv names them.
var Backends = []string{servers.Redis, servers.Postgres, servers.MySQL, servers.ZK}

// Profile says how much to run.
type Profile struct {
	Name        string
	Handovers   int           // at least this many handovers per backend
	PerFault    int           // at least this many injections of each fault
	MaxDuration time.Duration // stop injecting after this long even if short of the above
	Nodes       int
	Locks       int           // lock names
	Elections   int           // election names
	Workers     int           // goroutines per lock name and node (a lock is handed over within a client too)
	Idle        time.Duration // longest random pause of a node after it released a lock
	Lease       time.Duration
	Faults      []string // default AllFaults
	Broken      string   // a deliberate bug of every node (package broken), for the self-test
	// Progress, when set, gets a progress line with an ETA every few seconds.
	Progress io.Writer
}

// CI is the profile of make chaos and make test: at least 500 handovers
// and two injections of every fault per backend, about a minute each; a
// machine too slow for that within 75s fails the test rather than
// overrun go test's 10 minutes.
func CI() Profile {
	return Profile{Name: "ci", Handovers: 500, PerFault: 2, MaxDuration: 75 * time.Second,
		Nodes: 3, Locks: 8, Elections: 1, Workers: 1, Idle: 400 * time.Millisecond, Lease: time.Second}
}

// Topology is the profile of make topology, per topology: at least 20
// injections of each of the topology's faults, with a node fault
// (SIGKILL, SIGSTOP in turn) after each. No handover count: the resource
// counts a handover only when a name's highest token changes hands, and
// after tokens went back it refuses every write until they pass it again.
func Topology() Profile {
	return Profile{Name: "topology", Handovers: 0, PerFault: 20, MaxDuration: 30 * time.Minute,
		Nodes: 3, Locks: 8, Elections: 1, Workers: 1, Idle: 400 * time.Millisecond, Lease: time.Second,
		Faults: NodeFaults}
}

// TopologyShort is the profile of the topology test of make test: two
// injections of each of the topology's faults and no node fault; a
// topology that cannot inject them within 3 minutes fails the test (a
// Sentinel topology, five faults, takes about two).
func TopologyShort() Profile {
	p := Topology()
	p.Name, p.PerFault, p.MaxDuration, p.Faults = "topology-short", 2, 3*time.Minute, nil
	return p
}

// NodeFaults are the faults RunTopology can mix in: they hit a node, not
// the servers, and need no proxy.
var NodeFaults = []string{SigKill, SigStop}

// Soak is the long profile: at least 10,000 handovers per backend.
func Soak() Profile {
	return Profile{Name: "soak", Handovers: 10000, PerFault: 10, MaxDuration: 60 * time.Minute,
		Nodes: 3, Locks: 16, Elections: 1, Workers: 1, Idle: 400 * time.Millisecond, Lease: time.Second}
}

// Timing returns the session timing of the profile's nodes (the defaults
// derived from the lease) and the slack of the failover bound: the node
// restarted after a crash, and a loaded machine's scheduling delay.
func (p Profile) Timing() check.Timing {
	renew := p.Lease / 3
	return check.Timing{Lease: p.Lease, Renew: renew, Jitter: renew / 2, Slack: 250 * time.Millisecond,
		EvictGrace: 2*renew + 250*time.Millisecond}
}

// Outcome is the result of a run on one backend or topology.
type Outcome struct {
	Backend  string
	Topology string // the topology's name; empty for Run
	Profile  string
	Result   *check.Result
	Duration time.Duration
	Dir      string // histories and logs
}

// Env is what a run needs besides the profile.
type Env struct {
	Dir      string // a fresh directory for the run's files and server
	NodeBin  string // the chaosnode binary (BuildNode)
	RepoRoot string
}

// RepoRoot returns the repository root: the first directory above the
// working directory that holds tools/testenv/lib.sh.
func RepoRoot() (string, error) {
	lib, err := servers.FindLib()
	if err != nil {
		return "", err
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(lib))), nil
}

// BuildNode builds the node program into dir and returns its path.
func BuildNode(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "chaosnode")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/chaosnode")
	cmd.Dir = filepath.Join(root, "tools", "chaos")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("suite: build chaosnode: %w\n%s", err, out)
	}
	return bin, nil
}

// run is one backend's run in progress.
type run struct {
	p      Profile
	env    Env
	kind   string
	label  string          // the backend or topology in progress lines
	url    string          // the backend URL, without a node's proxy
	srv    *servers.Server // Run's server; nil for a topology
	topo   topology.Topology
	fence  *fence.Server
	log    *history.Writer
	rng    *rand.Rand
	faults map[string]int
	// schedule is the order of the faults, round after round; counted are
	// the faults whose injections the profile counts.
	schedule, counted []string

	nodes []*nodeProc
	wg    sync.WaitGroup
}

type nodeProc struct {
	slot    int
	name    string // changes on every restart: n1, n1.2, n1.3 ...
	history string
	proxy   *proxy.Proxy // nil on a topology
	cmd     *exec.Cmd
	done    chan struct{}
}

// Run runs profile p on a private server of kind and checks the run.
func Run(ctx context.Context, p Profile, kind string, env Env) (out *Outcome, err error) {
	if !slices.Contains(Backends, kind) {
		return nil, fmt.Errorf("%w: unknown backend %q", ErrProfile, kind)
	}
	if err := p.valid(); err != nil {
		return nil, err
	}
	if len(p.Faults) == 0 {
		p.Faults = AllFaults
	}
	if kind == servers.ZK {
		// A Zookeeper session cannot be deleted from outside its client.
		p.Faults = slices.DeleteFunc(slices.Clone(p.Faults), func(f string) bool { return f == Evict })
	}
	for _, f := range p.Faults {
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("%w: unknown fault %q", ErrProfile, f)
		}
	}
	began := time.Now()
	if err := os.MkdirAll(env.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("suite: %w", err)
	}
	r := &run{p: p, env: env, kind: kind, label: kind, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)),
		faults: map[string]int{}, schedule: p.Faults, counted: p.Faults}
	r.srv, err = servers.Start(ctx, env.Dir, kind)
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := r.srv.Down(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	r.url = r.srv.URL()
	res, err := r.execute(ctx)
	if err != nil {
		return nil, err
	}
	return &Outcome{Backend: kind, Profile: p.Name, Result: res, Duration: time.Since(began), Dir: env.Dir}, nil
}

// RunTopology runs profile p on topology t, which the caller started and
// stops, and checks the run. The nodes open t.URL() directly, without a
// proxy; the faults are t.Faults(), each recorded as begin and end around
// t.Inject, with p.Faults (node faults only: NodeFaults) in turn after
// each. The profile's injections count t.Faults() only. Where
// t.TokensMayGoBack(), token regressions, and overlaps begun after a
// server fault, are counted, not failed (check.TokensMayGoBack).
func RunTopology(ctx context.Context, p Profile, t topology.Topology, env Env) (*Outcome, error) {
	if !slices.Contains(Backends, t.Backend()) {
		return nil, fmt.Errorf("%w: topology %s has an unknown backend %q", ErrProfile, t.Name(), t.Backend())
	}
	if err := p.valid(); err != nil {
		return nil, err
	}
	for _, f := range p.Faults {
		if !slices.Contains(NodeFaults, f) {
			return nil, fmt.Errorf("%w: %q is not a node fault a topology run can mix in (%v)", ErrProfile, f, NodeFaults)
		}
	}
	tf := t.Faults()
	if len(tf) == 0 {
		return nil, fmt.Errorf("%w: topology %s has no fault", ErrProfile, t.Name())
	}
	began := time.Now()
	if err := os.MkdirAll(env.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("suite: %w", err)
	}
	r := &run{p: p, env: env, kind: t.Backend(), label: t.Name(), url: t.URL(), topo: t,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), faults: map[string]int{},
		schedule: topologySchedule(tf, p.Faults), counted: tf}
	var opts []check.Option
	if t.TokensMayGoBack() {
		opts = append(opts, check.TokensMayGoBack)
	}
	res, err := r.execute(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &Outcome{Backend: t.Backend(), Topology: t.Name(), Profile: p.Name, Result: res,
		Duration: time.Since(began), Dir: env.Dir}, nil
}

// Striker is a topology that tells when its last fault struck: the
// SIGKILL, the failover command, after whatever Inject did first. A run
// on it records that moment (a "strike" fault record), and measures the
// time to work again from there rather than from the fault's begin.
type Striker interface {
	FaultAt() time.Time
}

// topologySchedule puts a node fault, in turn, after each topology fault:
// every pairing of the two comes round.
func topologySchedule(tf, nf []string) []string {
	if len(nf) == 0 {
		return tf
	}
	n := len(tf) * len(nf) / gcd(len(tf), len(nf))
	out := make([]string, 0, 2*n)
	for i := range n {
		out = append(out, tf[i%len(tf)], nf[i%len(nf)])
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// valid checks the counts and durations of a profile.
func (p Profile) valid() error {
	if p.Nodes < 2 || p.Lease <= 0 || p.Locks < 0 || p.Elections < 0 || p.Locks+p.Elections < 1 ||
		p.MaxDuration <= 0 || p.Workers < 1 || p.Idle < 0 {
		return fmt.Errorf("%w: need 2 nodes or more, a lease, a name, a duration and a worker per name", ErrProfile)
	}
	return nil
}

// execute migrates, starts the resource and the nodes, injects the
// faults, stops everything and checks the histories.
func (r *run) execute(ctx context.Context, opts ...check.Option) (*check.Result, error) {
	var err error
	if err := r.migrate(ctx); err != nil {
		return nil, err
	}
	r.log, err = history.Create(filepath.Join(r.env.Dir, "suite.jsonl"), check.Suite)
	if err != nil {
		return nil, err
	}
	r.fence, err = fence.Listen(filepath.Join(r.env.Dir, "fence.sock"), r.log)
	if err != nil {
		_ = r.log.Close()
		return nil, err
	}
	for i := range r.p.Nodes {
		n := &nodeProc{slot: i, name: fmt.Sprintf("n%d", i+1)}
		if r.srv != nil {
			n.proxy, err = proxy.Listen(r.srv.Addr())
			if err != nil {
				r.shutdown()
				return nil, err
			}
		}
		r.nodes = append(r.nodes, n)
		if err := r.startNode(n); err != nil {
			r.shutdown()
			return nil, err
		}
	}
	injectErr := r.inject(ctx)
	r.shutdown()
	if injectErr != nil {
		return nil, injectErr
	}

	recs, err := history.ReadFile(filepath.Join(r.env.Dir, "suite.jsonl"))
	if err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(r.env.Dir, "node-*.jsonl"))
	for _, f := range files {
		rs, err := history.ReadFile(f)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rs...)
	}
	return check.Check(recs, r.p.Timing(), opts...), nil
}

// migrate creates the tables of a SQL backend: nodes open it by URL,
// which never migrates.
func (r *run) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	switch r.kind {
	case servers.Postgres:
		b, err := simbapg.Open(ctx, r.url, simbapg.Options{Migrate: true})
		if err != nil {
			return fmt.Errorf("suite: migrate: %w", err)
		}
		return b.Close()
	case servers.MySQL:
		b, err := simbamysql.Open(ctx, r.url, simbamysql.Options{Migrate: true})
		if err != nil {
			return fmt.Errorf("suite: migrate: %w", err)
		}
		return b.Close()
	}
	return nil
}

// nodeURL is the server's URL with the node's proxy as its address, or
// the topology's URL.
func (r *run) nodeURL(n *nodeProc) string {
	if n.proxy == nil {
		return r.url
	}
	return strings.Replace(r.url, r.srv.Addr(), n.proxy.Addr(), 1)
}

func (r *run) startNode(n *nodeProc) error {
	n.history = filepath.Join(r.env.Dir, "node-"+n.name+".jsonl")
	logf, err := os.Create(filepath.Join(r.env.Dir, "node-"+n.name+".log"))
	if err != nil {
		return fmt.Errorf("suite: %w", err)
	}
	args := []string{"-backend", r.nodeURL(n), "-history", n.history, "-fence", filepath.Join(r.env.Dir, "fence.sock"),
		"-node", n.name, "-locks", fmt.Sprint(r.p.Locks), "-elections", fmt.Sprint(r.p.Elections),
		"-lease", r.p.Lease.String(), "-hold", (3 * r.p.Lease).String(),
		"-workers", fmt.Sprint(r.p.Workers), "-idle", r.p.Idle.String()}
	if r.p.Broken != "" {
		args = append(args, "-broken", r.p.Broken)
	}
	cmd := exec.Command(r.env.NodeBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("suite: start node: %w", err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	done := n.done
	r.wg.Go(func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	})
	return nil
}

// shutdown stops the nodes (SIGTERM, then SIGKILL after 10s), the proxies
// and the resource.
func (r *run) shutdown() {
	for _, n := range r.nodes {
		if n.cmd != nil {
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
		if n.proxy != nil {
			n.proxy.Set(proxy.Pass, 0)
		}
	}
	for _, n := range r.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.done:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
	r.wg.Wait()
	for _, n := range r.nodes {
		if n.proxy != nil {
			_ = n.proxy.Close()
		}
	}
	if r.fence != nil {
		_ = r.fence.Close()
	}
	_ = r.log.Close()
}

// inject runs the clean phase, then the faults in turn until the profile
// is reached.
func (r *run) inject(ctx context.Context) error {
	start := time.Now()
	if wait.Sleep(ctx, 3*time.Second) != nil {
		return ctx.Err()
	}
	lastProgress := time.Time{}
	for i := 0; ; i++ {
		if r.reached() || time.Since(start) > r.p.MaxDuration {
			return nil
		}
		if r.p.Progress != nil && time.Since(lastProgress) > 2*time.Second {
			lastProgress = time.Now()
			r.progress(start)
		}
		if err := r.nodesAlive(); err != nil {
			return err
		}
		f := r.schedule[i%len(r.schedule)]
		if err := r.fault(ctx, f); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// nodesAlive fails when a node exited on its own (it is restarted only
// after SIGKILL), with the end of its log.
func (r *run) nodesAlive() error {
	for _, n := range r.nodes {
		select {
		case <-n.done:
			out, _ := os.ReadFile(filepath.Join(r.env.Dir, "node-"+n.name+".log"))
			if len(out) > 2000 {
				out = out[len(out)-2000:]
			}
			return fmt.Errorf("%w: node %s exited: %s", ErrNodeDied, n.name, out)
		default:
		}
	}
	return nil
}

func (r *run) reached() bool {
	if r.fence.Handovers() < r.p.Handovers {
		return false
	}
	for _, f := range r.counted {
		if r.faults[f] < r.p.PerFault {
			return false
		}
	}
	return true
}

// progress prints a bar and an ETA. The run ends when both the
// handovers and the injections are reached, so the bar shows the one
// further behind.
func (r *run) progress(start time.Time) {
	done := r.fence.Handovers()
	frac := 1.0
	if r.p.Handovers > 0 {
		frac = min(float64(done)/float64(r.p.Handovers), 1)
	}
	injected := 0
	for _, f := range r.counted {
		injected += min(r.faults[f], r.p.PerFault)
	}
	if want := r.p.PerFault * len(r.counted); want > 0 {
		frac = min(frac, float64(injected)/float64(want))
	}
	elapsed := time.Since(start)
	eta := "?"
	if frac > 0 {
		eta = (time.Duration(float64(elapsed)/frac) - elapsed).Round(time.Second).String()
	}
	const width = 30
	bar := strings.Repeat("#", int(frac*width)) + strings.Repeat(".", width-int(frac*width))
	handovers := fmt.Sprintf("%6d/%d", done, r.p.Handovers)
	if r.p.Handovers == 0 {
		handovers = fmt.Sprintf("%6d", done)
	}
	fmt.Fprintf(r.p.Progress, "%-9s [%s] %s handovers, %d/%d injections  %s elapsed  ETA %s\n",
		r.label, bar, handovers, injected, r.p.PerFault*len(r.counted), elapsed.Round(time.Second), eta)
}

// victim picks, one time in two, the leader of leader-0 (its terms last
// longest), else the node that wrote last: both most likely hold a lease
// now. Without either, a random node.
func (r *run) victim() *nodeProc {
	last := r.fence.LastWriter()
	if leader := r.fence.Owner("leader-0"); leader != "" && r.rng.IntN(2) == 0 {
		last = leader
	}
	for _, n := range r.nodes {
		if n.name == last {
			return n
		}
	}
	return r.nodes[r.rng.IntN(len(r.nodes))]
}

func (r *run) record(kind, phase, node string) {
	r.log.Add(history.Record{Kind: history.KindFault, Fault: kind, Phase: phase, Node: node})
}

// fault injects one fault and waits for the system to settle.
func (r *run) fault(ctx context.Context, kind string) error {
	lease := r.p.Lease
	past := lease + lease/2 + 300*time.Millisecond // past the lease, whatever the phase of the keep-alives
	settle := lease + lease/2
	r.faults[kind]++
	if r.topo != nil && slices.Contains(r.counted, kind) {
		// A fault of the servers: no victim node.
		r.record(kind, "begin", "")
		began := time.Now()
		err := r.topo.Inject(ctx, kind)
		r.record(kind, "end", "")
		if s, ok := r.topo.(Striker); ok {
			if at := s.FaultAt(); at.After(began) {
				// The monotonic clock of the histories, at that moment.
				r.log.Add(history.Record{T: history.Mono() - int64(time.Since(at)), Kind: history.KindFault,
					Fault: kind, Phase: "strike"})
			}
		}
		if err != nil {
			return fmt.Errorf("inject %s: %w", kind, err)
		}
		_ = wait.Sleep(ctx, settle)
		return nil
	}
	v := r.victim()
	switch kind {
	case SigStop:
		r.record(kind, "begin", v.name)
		_ = v.cmd.Process.Signal(syscall.SIGSTOP)
		_ = wait.Sleep(ctx, past)
		_ = v.cmd.Process.Signal(syscall.SIGCONT)
		r.record(kind, "end", v.name)
	case SigKill:
		r.record(kind, "begin", v.name)
		_ = v.cmd.Process.Kill()
		<-v.done
		v.name = nextIncarnation(v.name)
		if err := r.startNode(v); err != nil {
			return err
		}
		r.record(kind, "end", v.name)
	case BlackHole:
		r.proxyFault(ctx, kind, v, proxy.BlackHole, 0, past)
	case Slow:
		r.proxyFault(ctx, kind, v, proxy.Slow, lease/4, 2*lease)
	case ConnKill:
		r.record(kind, "begin", "")
		if err := r.killConnections(ctx); err != nil {
			return err
		}
		r.record(kind, "end", "")
	case Restart:
		r.record(kind, "begin", "")
		if err := r.srv.Stop(ctx); err != nil {
			return err
		}
		_ = wait.Sleep(ctx, 200*time.Millisecond)
		if err := r.srv.Resume(ctx); err != nil {
			return err
		}
		r.record(kind, "end", "")
	case Expire:
		r.proxyFault(ctx, kind, v, proxy.Refuse, 0, past)
	case Evict:
		r.record(kind, "begin", v.name)
		if err := r.evict(ctx, v); err != nil {
			return err
		}
		r.record(kind, "end", v.name)
	}
	_ = wait.Sleep(ctx, settle)
	return nil
}

// proxyFault sets the proxy of node v to mode (with delay, for
// proxy.Slow) for d, or until ctx ends, then back to proxy.Pass, between
// the fault's begin and end records.
func (r *run) proxyFault(ctx context.Context, kind string, v *nodeProc, mode proxy.Mode, delay, d time.Duration) {
	r.record(kind, "begin", v.name)
	v.proxy.Set(mode, delay)
	_ = wait.Sleep(ctx, d)
	v.proxy.Set(proxy.Pass, 0)
	r.record(kind, "end", v.name)
}

func nextIncarnation(name string) string {
	base, n := name, 1
	if b, num, ok := strings.Cut(name, "."); ok {
		base = b
		_, _ = fmt.Sscan(num, &n)
	}
	return fmt.Sprintf("%s.%d", base, n+1)
}

// redisDo runs one command on the run's Redis server, on a connection of
// its own.
func (r *run) redisDo(ctx context.Context, args ...any) error {
	c := redis.NewClient(&redis.Options{Addr: r.srv.Addr()})
	defer c.Close()
	return c.Do(ctx, args...).Err()
}

// killConnections has the server end every client connection but the
// suite's own: CLIENT KILL, pg_terminate_backend, KILL. Zookeeper has no
// such command: there the proxies reset every connection.
func (r *run) killConnections(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch r.kind {
	case servers.Redis:
		for _, typ := range []string{"normal", "pubsub"} {
			if err := r.redisDo(ctx, "CLIENT", "KILL", "TYPE", typ, "SKIPME", "yes"); err != nil {
				return fmt.Errorf("suite: CLIENT KILL: %w", err)
			}
		}
	case servers.Postgres:
		return r.exec(ctx, "pg_terminate_backend", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`, "")
	case servers.MySQL:
		db, err := sql.Open("mysql", r.mysqlDSN())
		if err != nil {
			return fmt.Errorf("suite: %w", err)
		}
		defer db.Close()
		conn, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("suite: %w", err)
		}
		defer conn.Close()
		rows, err := conn.QueryContext(ctx, `SELECT id FROM information_schema.processlist
			WHERE id <> CONNECTION_ID() AND user = 'root' AND command <> 'Daemon'`)
		if err != nil {
			return fmt.Errorf("suite: processlist: %w", err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return fmt.Errorf("suite: %w", err)
			}
			ids = append(ids, id)
		}
		err = rows.Err()
		_ = rows.Close()
		if err != nil {
			return fmt.Errorf("suite: processlist: %w", err)
		}
		for _, id := range ids {
			// A connection may have closed since the list was read.
			_, _ = conn.ExecContext(ctx, fmt.Sprintf("KILL %d", id))
		}
	case servers.ZK:
		for _, n := range r.nodes {
			n.proxy.Reset()
		}
	}
	return nil
}

// evict deletes the victim's session on the server while the victim runs:
// its session key (Redis) or row (SQL), as a Redis eviction or an operator
// would. The server breaks its grant: the victim learns at its next
// keep-alive, and until then its term overlaps the next one (the checker
// allows that much, see check.Timing.EvictGrace); the resource refuses its
// stale writes.
func (r *run) evict(ctx context.Context, v *nodeProc) error {
	sid, err := lastSession(v.history)
	if err != nil || sid == "" {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch r.kind {
	case servers.Redis:
		if err := r.redisDo(ctx, "DEL", "simba:session:"+sid); err != nil {
			return fmt.Errorf("suite: expire: %w", err)
		}
	case servers.Postgres, servers.MySQL:
		return r.exec(ctx, "expire", `DELETE FROM simba_session WHERE id = $1`, `DELETE FROM simba_session WHERE id = ?`, sid)
	}
	return nil
}

// mysqlDSN is the data source name of the suite's own MySQL connections.
func (r *run) mysqlDSN() string { return "root@tcp(" + r.srv.Addr() + ")/simba_test" }

// exec runs one statement on the SQL server of the run, through a
// connection of its own: pg on PostgreSQL, my on MySQL; what names it in
// the error.
func (r *run) exec(ctx context.Context, what, pg, my string, args ...any) error {
	switch r.kind {
	case servers.Postgres:
		c, err := pgx.Connect(ctx, r.srv.URL())
		if err != nil {
			return fmt.Errorf("suite: %w", err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		if _, err := c.Exec(ctx, pg, args...); err != nil {
			return fmt.Errorf("suite: %s: %w", what, err)
		}
	case servers.MySQL:
		db, err := sql.Open("mysql", r.mysqlDSN())
		if err != nil {
			return fmt.Errorf("suite: %w", err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, my, args...); err != nil {
			return fmt.Errorf("suite: %s: %w", what, err)
		}
	}
	return nil
}

// lastSession returns the id of the last session a node's history records.
func lastSession(path string) (string, error) {
	recs, err := history.ReadFile(path)
	if err != nil {
		return "", err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Kind == history.KindSession {
			return recs[i].Session, nil
		}
	}
	return "", nil
}
