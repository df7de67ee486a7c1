package topology

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/tools/chaos/internal/proxy"
	"github.com/simba-go/simba/tools/chaos/internal/servers"
)

//go:embed postgres.sh
var postgresScript []byte

// PostgresOptions configures StartPostgresReplica.
type PostgresOptions struct {
	// Sync makes the primary wait, at every commit, until its standby
	// has flushed the commit's WAL (synchronous_standby_names = '*',
	// synchronous_commit = on): a promoted standby then holds every
	// commit a client saw. Without it the standby streams asynchronously
	// and may lack the last commits when the primary dies.
	Sync bool
	// LinkDelay, when positive, delays the replication stream by that
	// much per chunk, in each direction: the replica connects to its
	// primary through a TCP proxy (a link slower than loopback, a
	// replica behind). The proxy's connections are cut when the primary
	// is killed, as a crashed host's unsent bytes are lost. Without it
	// the proxy only forwards.
	LinkDelay time.Duration
}

// Postgres is a PostgreSQL primary and its streaming replica on loopback,
// each a server of its own on a free port.
type Postgres struct {
	opts   PostgresOptions
	script servers.Script

	mu      sync.Mutex
	nodes   [2]pgNode
	links   [2]*proxy.Proxy // to each node, for its replica
	primary int             // index in nodes of the current primary
}

type pgNode struct {
	dir  string
	port int
}

var _ Topology = (*Postgres)(nil)

// StartPostgresReplica starts a primary under dir/pg1 and a replica of it
// built with pg_basebackup under dir/pg2, and returns once the replica
// streams (and, with opts.Sync, once a commit on the primary has been
// acknowledged by it). Down stops both.
func StartPostgresReplica(ctx context.Context, dir string, opts PostgresOptions) (*Postgres, error) {
	sh, err := writeScript(dir, "postgres.sh", postgresScript)
	if err != nil {
		return nil, err
	}
	sh.Timeout = 3 * time.Minute
	// The postgres user must reach the nodes' directories (lib.sh moves
	// the data to /var/tmp when it cannot).
	_ = os.Chmod(dir, 0o755)
	p := &Postgres{opts: opts, script: sh}
	ports, err := listenLinks(p.links[:])
	if err != nil {
		_ = p.Down(ctx)
		return nil, err
	}
	for i, port := range ports {
		p.nodes[i] = pgNode{dir: filepath.Join(dir, fmt.Sprintf("pg%d", i+1)), port: port}
	}
	if err := p.start(ctx); err != nil {
		_ = p.Down(context.WithoutCancel(ctx))
		return nil, err
	}
	return p, nil
}

func (p *Postgres) start(ctx context.Context) error {
	a := p.nodes[0]
	if err := p.run(ctx, "primary", a.dir, fmt.Sprint(a.port)); err != nil {
		return err
	}
	sync := "off"
	if p.opts.Sync {
		sync = "on"
	}
	if err := p.run(ctx, "sync", a.dir, fmt.Sprint(a.port), sync); err != nil {
		return err
	}
	if err := p.attach(ctx, 1, 0); err != nil {
		return err
	}
	return p.waitWritable(ctx, a)
}

// attach wipes node r and makes it a replica of node from, through the
// proxy to from: at full speed for pg_basebackup, then slowed by LinkDelay.
func (p *Postgres) attach(ctx context.Context, r, from int) error {
	link := p.links[from]
	link.Set(proxy.Pass, 0)
	if err := p.run(ctx, "replica", p.nodes[r].dir, fmt.Sprint(p.nodes[r].port), linkPort(link)); err != nil {
		return err
	}
	if p.opts.LinkDelay > 0 {
		link.Set(proxy.Slow, p.opts.LinkDelay)
	}
	return nil
}

// Name is "postgres-sync" or "postgres-async", followed by the link
// delay when there is one ("postgres-async-5ms").
func (p *Postgres) Name() string {
	name := "postgres-async"
	if p.opts.Sync {
		name = "postgres-sync"
	}
	if p.opts.LinkDelay > 0 {
		name += "-" + p.opts.LinkDelay.String()
	}
	return name
}

// Backend is "postgres".
func (p *Postgres) Backend() string { return "postgres" }

// URL names both servers, the primary found by pgx's
// target_session_attrs=read-write: a connection goes to the first host
// that accepts writes.
func (p *Postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?target_session_attrs=read-write&sslmode=disable",
		p.nodes[0].port, p.nodes[1].port)
}

// Addrs are the two servers' host:port, the first node's first.
func (p *Postgres) Addrs() []string {
	return []string{
		fmt.Sprintf("127.0.0.1:%d", p.nodes[0].port),
		fmt.Sprintf("127.0.0.1:%d", p.nodes[1].port),
	}
}

// Primary is the host:port of the current primary.
func (p *Postgres) Primary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("127.0.0.1:%d", p.nodes[p.primary].port)
}

// Faults is the one fault of this topology, Promote.
func (p *Postgres) Faults() []string { return []string{Promote} }

// TokensMayGoBack holds with asynchronous replication: commits the
// replica had not received when the primary died are lost, tokens
// included.
func (p *Postgres) TokensMayGoBack() bool { return !p.opts.Sync }

// Inject injects Promote: it kills the primary with SIGKILL (a crash), promotes
// the replica, then rebuilds the old primary as a replica of the new one
// with pg_basebackup, so that the next Promote goes back. It returns once
// the new primary commits (with Sync, which needs the rebuilt standby).
func (p *Postgres) Inject(ctx context.Context, fault string) error {
	if fault != Promote {
		return fmt.Errorf("%w %q on %s", ErrUnknownFault, fault, p.Name())
	}
	_, err := p.Promote(ctx, nil)
	return err
}

// Promote is Inject(Promote), with promoted, when not nil, called right
// after the promotion (before the old primary is rebuilt). It returns the
// time the SIGKILL was sent.
func (p *Postgres) Promote(ctx context.Context, promoted func()) (killed time.Time, err error) {
	p.mu.Lock()
	oldIdx := p.primary
	old, next := p.nodes[oldIdx], p.nodes[1-oldIdx]
	p.mu.Unlock()
	// The host dies with its link: what the proxy still holds was never
	// sent, and the replica cannot connect again.
	p.links[oldIdx].Set(proxy.Refuse, 0)
	killed = time.Now()
	out, err := p.output(ctx, "kill", old.dir)
	if err != nil {
		return killed, err
	}
	for line := range strings.Lines(out) {
		if ns, ok := strings.CutPrefix(strings.TrimSpace(line), "killed "); ok {
			if n, err := strconv.ParseInt(ns, 10, 64); err == nil {
				killed = time.Unix(0, n)
			}
		}
	}
	if err := p.run(ctx, "promote", next.dir); err != nil {
		return killed, err
	}
	p.mu.Lock()
	p.primary = 1 - p.primary
	p.mu.Unlock()
	if promoted != nil {
		promoted()
	}
	if err := p.attach(ctx, oldIdx, 1-oldIdx); err != nil {
		return killed, err
	}
	return killed, p.waitWritable(ctx, next)
}

// waitWritable waits until n is out of recovery and a commit that takes a
// transaction id succeeds on it (with Sync, acknowledged by the standby).
func (p *Postgres) waitWritable(ctx context.Context, n pgNode) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=3", n.port)
	var last error
	for {
		last = pgWriteOnce(ctx, url)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topology: %s on port %d does not commit: %w", p.Name(), n.port, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func pgWriteOnce(ctx context.Context, url string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var recovery bool
	if err := c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovery); err != nil {
		return err
	}
	if recovery {
		return errors.New("still in recovery")
	}
	_, err = c.Exec(ctx, "SELECT txid_current()")
	return err
}

// Down stops both servers and deletes their data.
func (p *Postgres) Down(ctx context.Context) error {
	var errs []error
	for _, l := range p.links {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	for _, n := range p.nodes {
		if n.dir != "" {
			errs = append(errs, p.run(ctx, "down", n.dir))
		}
	}
	return errors.Join(errs...)
}

func (p *Postgres) run(ctx context.Context, action string, args ...string) error {
	_, err := p.output(ctx, action, args...)
	return err
}

// output runs the script's action and returns its standard output.
func (p *Postgres) output(ctx context.Context, action string, args ...string) (string, error) {
	out, err := p.script.Run(ctx, append([]string{action}, args...)...)
	if err != nil {
		return "", fmt.Errorf("topology: %s: %w", p.Name(), err)
	}
	return out, nil
}
