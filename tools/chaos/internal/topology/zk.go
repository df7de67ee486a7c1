package topology

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/history"
	"github.com/simba-go/simba/tools/chaos/internal/servers"
	"github.com/simba-go/simba/tools/internal/wait"
)

//go:embed zk.sh
var zkScript []byte

// ZKOptions configures [StartZKEnsemble]. The zero value is usable.
type ZKOptions struct {
	// Tick is the servers' tickTime; they grant sessions from two ticks.
	// Default 100ms, so that sessions of a second or less are granted.
	Tick time.Duration
	// MaxSession caps the session timeouts the servers grant. Default 60s.
	MaxSession time.Duration
	// Bound is how long Inject waits for the ensemble to serve again
	// after a kill, and the restarted member to rejoin. Default 60s.
	Bound time.Duration
}

// ZKEnsemble is three Zookeeper servers of the Debian package forming one
// ensemble on loopback, each a separate process on ports of its own.
type ZKEnsemble struct {
	dir     string // holds a state directory per member
	script  servers.Script
	members [zkMembers]zkMember
	bound   time.Duration

	mu   sync.Mutex
	last ZKFault
}

// zkMembers is the size of the ensemble.
const zkMembers = 3

type zkMember struct {
	id                     int // its myid, 1..3
	client, peer, election int
}

// ZKFault describes the last fault injected, on the clock of package
// history (CLOCK_MONOTONIC, ns), so that it compares with the records of
// the nodes.
type ZKFault struct {
	Fault  string
	Member int   // myid of the member killed
	Leader bool  // it was the leader when killed
	Kill   int64 // when the SIGKILL was sent
	// Serving is when the survivors answered again with a leader among
	// them, Rejoined when the killed member, started again, served again.
	Serving, Rejoined int64
}

var _ Topology = (*ZKEnsemble)(nil)

// StartZKEnsemble starts a three-server ensemble in dir (created if need
// be), every server on free loopback ports (client, quorum and election
// port each), and returns once one member leads and all three serve.
func StartZKEnsemble(ctx context.Context, dir string, opts ZKOptions) (*ZKEnsemble, error) {
	if opts.Tick <= 0 {
		opts.Tick = 100 * time.Millisecond
	}
	if opts.MaxSession <= 0 {
		opts.MaxSession = time.Minute
	}
	if opts.Bound <= 0 {
		opts.Bound = time.Minute
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	sh, err := writeScript(dir, "zk.sh", zkScript)
	if err != nil {
		return nil, err
	}
	e := &ZKEnsemble{dir: filepath.Join(dir, "state"), script: sh, bound: opts.Bound}
	ports, err := freePorts(3 * zkMembers)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"SIMBA_TESTENV_DIR="+e.dir,
		fmt.Sprintf("SIMBA_TESTENV_TIMEOUT=%d", int(opts.Bound/time.Second)+1),
		fmt.Sprintf("ZK_ENSEMBLE_TICK_MS=%d", opts.Tick.Milliseconds()),
		fmt.Sprintf("ZK_ENSEMBLE_MAX_SESSION_MS=%d", opts.MaxSession.Milliseconds()),
	)
	for i := range e.members {
		m := zkMember{id: i + 1, client: ports[3*i], peer: ports[3*i+1], election: ports[3*i+2]}
		e.members[i] = m
		env = append(env,
			fmt.Sprintf("ZK_ENSEMBLE_CLIENT_%d=%d", m.id, m.client),
			fmt.Sprintf("ZK_ENSEMBLE_PEER_%d=%d", m.id, m.peer),
			fmt.Sprintf("ZK_ENSEMBLE_ELECTION_%d=%d", m.id, m.election),
		)
	}
	e.script.Env = env
	if err := e.do(ctx, "up"); err != nil {
		_ = e.do(context.WithoutCancel(ctx), "down")
		return nil, err
	}
	return e, nil
}

// Name is "zk-ensemble".
func (e *ZKEnsemble) Name() string { return "zk-ensemble" }

// Backend is "zk".
func (e *ZKEnsemble) Backend() string { return "zk" }

// URL lists every member, zk://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3.
func (e *ZKEnsemble) URL() string {
	return "zk://" + strings.Join(e.Addrs(), ",")
}

// Addrs are the members' client addresses, by myid.
func (e *ZKEnsemble) Addrs() []string {
	addrs := make([]string, 0, zkMembers)
	for _, m := range e.members {
		addrs = append(addrs, m.addr())
	}
	return addrs
}

func (m zkMember) addr() string { return fmt.Sprintf("127.0.0.1:%d", m.client) }

// Faults are the leader's kill and the kill of the follower most clients
// are connected to.
func (e *ZKEnsemble) Faults() []string { return []string{LeaderKill, FollowerKill} }

// TokensMayGoBack is false: a token is the lease node's czxid, which a
// quorum commits before any client sees it.
func (e *ZKEnsemble) TokensMayGoBack() bool { return false }

// Last returns the last fault injected.
func (e *ZKEnsemble) Last() ZKFault {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// Inject kills a member with SIGKILL: the leader (LeaderKill), found with
// the srvr four-letter word, or the follower that holds the most client
// connections (FollowerKill), found with cons. It waits until the two
// others serve with a leader among them, starts the killed member again
// on its data, and returns once it serves again as well.
func (e *ZKEnsemble) Inject(ctx context.Context, fault string) error {
	ctx, cancel := context.WithTimeout(ctx, e.bound)
	defer cancel()
	var victim zkMember
	var err error
	switch fault {
	case LeaderKill:
		victim, err = e.leader(ctx)
	case FollowerKill:
		victim, err = e.busiestFollower(ctx)
	default:
		return fmt.Errorf("%w: %q on %s", ErrUnknownFault, fault, e.Name())
	}
	if err != nil {
		return err
	}
	f := ZKFault{Fault: fault, Member: victim.id, Leader: fault == LeaderKill}
	if f.Kill, err = e.kill(ctx, victim); err != nil {
		return err
	}
	defer func() {
		e.mu.Lock()
		e.last = f
		e.mu.Unlock()
	}()
	if err := e.waitServing(ctx, victim.id); err != nil {
		return err
	}
	f.Serving = history.Mono()
	if err := e.do(ctx, "start", strconv.Itoa(victim.id)); err != nil {
		return err
	}
	if err := e.waitServing(ctx, 0); err != nil {
		return err
	}
	f.Rejoined = history.Mono()
	return nil
}

// Down stops every member and deletes their data. It may be called again.
func (e *ZKEnsemble) Down(ctx context.Context) error {
	return e.do(context.WithoutCancel(ctx), "down")
}

// Mode returns the mode member id (1..3) reports, "leader" or "follower",
// or "" while it does not serve.
func (e *ZKEnsemble) Mode(ctx context.Context, id int) string {
	out, err := zkFourLetter(ctx, e.members[id-1].addr(), "srvr")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(out) {
		if mode, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode: "); ok {
			return mode
		}
	}
	return ""
}

// Connections returns how many client connections with a session member
// id (1..3) holds, as its cons four-letter word lists them.
func (e *ZKEnsemble) Connections(ctx context.Context, id int) (int, error) {
	out, err := zkFourLetter(ctx, e.members[id-1].addr(), "cons")
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.Lines(out) {
		// The connection asking has no session yet: sid=0x0.
		if strings.Contains(line, "sid=0x") && !strings.Contains(line, "sid=0x0,") && !strings.Contains(line, "sid=0x0)") {
			n++
		}
	}
	return n, nil
}

// leader waits until a member reports itself leader and returns it.
func (e *ZKEnsemble) leader(ctx context.Context) (zkMember, error) {
	for {
		for _, m := range e.members {
			if e.Mode(ctx, m.id) == "leader" {
				return m, nil
			}
		}
		if err := wait.Sleep(ctx, 20*time.Millisecond); err != nil {
			return zkMember{}, fmt.Errorf("topology: no Zookeeper leader: %w", err)
		}
	}
}

// busiestFollower returns the follower with the most client connections.
func (e *ZKEnsemble) busiestFollower(ctx context.Context) (zkMember, error) {
	if err := e.waitServing(ctx, 0); err != nil {
		return zkMember{}, err
	}
	best, most := zkMember{}, -1
	for _, m := range e.members {
		if e.Mode(ctx, m.id) != "follower" {
			continue
		}
		n, err := e.Connections(ctx, m.id)
		if err != nil {
			continue
		}
		if n > most {
			best, most = m, n
		}
	}
	if most < 0 {
		return zkMember{}, errors.New("topology: no Zookeeper follower answered cons")
	}
	return best, nil
}

// kill sends SIGKILL to member m and returns when, then lets the script
// wait for its end (and kill what it left).
func (e *ZKEnsemble) kill(ctx context.Context, m zkMember) (int64, error) {
	dir := filepath.Join(e.dir, fmt.Sprintf("zk-%d", m.id))
	pid, err := servers.ReadPid(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, fmt.Errorf("topology: zk-%d: %w", m.id, err)
	}
	// The pid is this member's only while the process runs in its
	// directory (a pid may be reused).
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != dir {
		return 0, fmt.Errorf("topology: zk-%d (pid %d) does not run", m.id, pid)
	}
	t := history.Mono()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("topology: kill zk-%d: %w", m.id, err)
	}
	return t, e.do(ctx, "kill", strconv.Itoa(m.id))
}

// waitServing waits until one member leads and every member but skip (0:
// none) serves.
func (e *ZKEnsemble) waitServing(ctx context.Context, skip int) error {
	for {
		serving, leaders := 0, 0
		for _, m := range e.members {
			if m.id == skip {
				continue
			}
			switch e.Mode(ctx, m.id) {
			case "leader":
				serving++
				leaders++
			case "follower":
				serving++
			}
		}
		want := zkMembers
		if skip != 0 {
			want--
		}
		if serving == want && leaders == 1 {
			return nil
		}
		if err := wait.Sleep(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("topology: the Zookeeper ensemble does not serve: %w", err)
		}
	}
}

func (e *ZKEnsemble) do(ctx context.Context, args ...string) error {
	if _, err := e.script.Run(ctx, args...); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	return nil
}

// zkFourLetter sends a four-letter word to a Zookeeper server and returns
// its answer.
func zkFourLetter(ctx context.Context, addr, word string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("topology: %s %s: %w", word, addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, word); err != nil {
		return "", fmt.Errorf("topology: %s %s: %w", word, addr, err)
	}
	var b strings.Builder
	if _, err := io.Copy(&b, bufio.NewReader(c)); err != nil {
		return "", fmt.Errorf("topology: %s %s: %w", word, addr, err)
	}
	return b.String(), nil
}
