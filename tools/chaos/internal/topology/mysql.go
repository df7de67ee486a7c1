package topology

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/proxy"
	"github.com/simba-go/simba/tools/chaos/internal/servers"
)

//go:embed mysql.sh
var mariadbScript []byte

// MariaDBOptions configure StartMariaDBReplica.
type MariaDBOptions struct {
	// SemiSync turns on MariaDB's built-in semi-synchronous replication
	// on both nodes, with rpl_semi_sync_master_wait_point=AFTER_SYNC: a
	// commit is reported once the replica has the event in its relay log.
	// A primary without a replica waits rpl_semi_sync_master_timeout (1s
	// here) and then runs asynchronously until a replica catches up.
	SemiSync bool
	// LinkDelay, when positive, delays every chunk of the replication
	// stream by that much in each direction (a TCP proxy between the
	// replica and its primary), as a replica in another zone or region
	// would see it; the clients still reach both servers directly.
	LinkDelay time.Duration
}

// MariaDB is a MariaDB primary and one replica with GTID replication
// (log_bin, server_id, gtid_strict_mode, MASTER_USE_GTID=slave_pos), on
// two free loopback ports; the replica reaches its primary through a TCP
// proxy, which can delay the stream (MariaDBOptions.LinkDelay) and which
// is cut when the primary is killed. Its URL is the multi-host URL of simbamysql,
// which connects to the host whose @@read_only is 0; it authenticates as
// a user without READ ONLY ADMIN, whom read_only stops.
type MariaDB struct {
	dir       string
	script    servers.Script
	semiSync  bool
	linkDelay time.Duration
	password  string
	nodes     [2]*mariadbNode
	links     [2]*proxy.Proxy // to each node, for its replica

	mu        sync.Mutex
	primary   int // index into nodes
	promotion time.Duration
	killedAt  time.Time
	down      bool
}

type mariadbNode struct {
	id   int // server_id: 1, 2, then higher on each rebuild
	port int
	dir  string
}

var _ Topology = (*MariaDB)(nil)

// StartMariaDBReplica makes state directories under dir, starts a primary
// and a replica there, and returns once the replica has applied the
// primary's binary log.
func StartMariaDBReplica(ctx context.Context, dir string, opts MariaDBOptions) (*MariaDB, error) {
	sh, err := writeScript(dir, "mysql.sh", mariadbScript)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 12)
	_, _ = rand.Read(secret)
	m := &MariaDB{dir: dir, script: sh, semiSync: opts.SemiSync, linkDelay: opts.LinkDelay, password: hex.EncodeToString(secret)}
	m.script.Timeout = 3 * time.Minute
	m.script.Secret = m.password
	ports, err := listenLinks(m.links[:])
	if err != nil {
		_ = m.Down(ctx)
		return nil, err
	}
	for i, port := range ports {
		m.nodes[i] = &mariadbNode{id: i + 1, port: port, dir: filepath.Join(dir, fmt.Sprintf("node%d", i+1))}
		if opts.LinkDelay > 0 {
			m.links[i].Set(proxy.Slow, opts.LinkDelay)
		}
	}
	if err := m.run(ctx, m.nodes[0], "primary"); err != nil {
		_ = m.Down(ctx)
		return nil, err
	}
	if err := m.attach(ctx, m.nodes[1], 0); err != nil {
		_ = m.Down(ctx)
		return nil, err
	}
	return m, nil
}

// Name is "mysql-async" or "mysql-semisync", followed by the link delay
// when there is one ("mysql-async-5ms").
func (m *MariaDB) Name() string {
	name := "mysql-async"
	if m.semiSync {
		name = "mysql-semisync"
	}
	if m.linkDelay > 0 {
		name += "-" + m.linkDelay.String()
	}
	return name
}

// Backend is "mysql".
func (m *MariaDB) Backend() string { return "mysql" }

// URL lists both nodes, the first primary first.
func (m *MariaDB) URL() string {
	return fmt.Sprintf("mysql://simba:%s@127.0.0.1:%d,127.0.0.1:%d/simba_test",
		m.password, m.nodes[0].port, m.nodes[1].port)
}

// Secret is the password in URL, for a caller that must keep it out of
// its output.
func (m *MariaDB) Secret() string { return m.password }

// Faults are replica-promote (the primary killed) and failover (a
// switchover with the primary alive).
func (m *MariaDB) Faults() []string { return []string{Promote, Failover} }

// TokensMayGoBack is true with asynchronous replication: a term committed
// on the primary and not yet received by the replica is lost with the
// primary, and its token is handed out again.
func (m *MariaDB) TokensMayGoBack() bool { return !m.semiSync }

// Primary is the address of the current primary.
func (m *MariaDB) Primary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("127.0.0.1:%d", m.nodes[m.primary].port)
}

// LastKill is when the last Inject sent SIGKILL to the primary (or, for
// a failover, turned it read-only).
func (m *MariaDB) LastKill() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.killedAt
}

// LastPromotion is how long the last Inject took from the SIGKILL (or the
// demotion) of the primary to the replica accepting writes.
func (m *MariaDB) LastPromotion() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.promotion
}

// Inject of replica-promote kills the primary with SIGKILL (and cuts its
// replication link, dropping what was in flight), promotes the
// replica by hand (every event it received applied, then STOP SLAVE,
// RESET SLAVE ALL, read_only=OFF), and rebuilds the old primary empty as
// a replica of the new one (its data may hold terms the new primary never
// received: it cannot rejoin on it). It returns once that replica has
// caught up, so that the next injection can promote it back.
//
// Inject of failover is a planned switchover: the primary is turned
// read-only (its clients stay connected), the replica catches up and is
// promoted as above, and the old primary replicates from it on its own
// data.
func (m *MariaDB) Inject(ctx context.Context, fault string) error {
	switch fault {
	case Promote:
	case Failover:
		return m.switchover(ctx)
	default:
		return fmt.Errorf("%w: %q on %s", ErrUnknownFault, fault, m.Name())
	}
	m.mu.Lock()
	old, next := m.nodes[m.primary], m.nodes[1-m.primary]
	m.mu.Unlock()
	// The SIGKILL is sent here, so that its instant is known; the script
	// then waits for the process to go and kills any left in its directory.
	// The replication link to it is cut at the same instant: what was in
	// flight on it is lost, as in a crash of its host.
	if pid, err := servers.ReadPid(filepath.Join(old.dir, "mysql", "pid")); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	m.links[m.primaryIndex(old)].Reset()
	start := m.strike()
	if err := m.run(ctx, old, "kill"); err != nil {
		return err
	}
	if err := m.run(ctx, next, "promote"); err != nil {
		return err
	}
	m.promoted(start)
	// A new server_id for the rebuilt node: its GTIDs must not be taken
	// for the old primary's.
	old.id += 2
	return m.attach(ctx, old, m.primaryIndex(next))
}

func (m *MariaDB) switchover(ctx context.Context) error {
	m.mu.Lock()
	oi := m.primary
	old, next := m.nodes[oi], m.nodes[1-oi]
	m.mu.Unlock()
	start := m.strike()
	if err := m.run(ctx, old, "demote"); err != nil {
		return err
	}
	if err := m.run(ctx, next, "caught-up", fmt.Sprint(old.port)); err != nil {
		return err
	}
	if err := m.run(ctx, next, "promote"); err != nil {
		return err
	}
	m.promoted(start)
	if err := m.run(ctx, old, "rejoin", linkPort(m.links[1-oi])); err != nil {
		return err
	}
	return m.run(ctx, old, "caught-up", fmt.Sprint(next.port))
}

// strike records that a fault strikes the primary now and returns the
// instant.
func (m *MariaDB) strike() time.Time {
	start := time.Now()
	m.mu.Lock()
	m.killedAt = start
	m.mu.Unlock()
	return start
}

// promoted records that the other node is the primary now, a promotion
// that took since start, the instant strike returned.
func (m *MariaDB) promoted(start time.Time) {
	m.mu.Lock()
	m.promotion = time.Since(start)
	m.primary = 1 - m.primary
	m.mu.Unlock()
}

func (m *MariaDB) primaryIndex(n *mariadbNode) int {
	if m.nodes[0] == n {
		return 0
	}
	return 1
}

// attach rebuilds replica empty, replicating from the node at index
// primary through its link, and waits until it has caught up.
func (m *MariaDB) attach(ctx context.Context, replica *mariadbNode, primary int) error {
	if err := m.run(ctx, replica, "replica", linkPort(m.links[primary])); err != nil {
		return err
	}
	return m.run(ctx, replica, "caught-up", fmt.Sprint(m.nodes[primary].port))
}

// Down stops both servers and deletes their data. It is idempotent.
func (m *MariaDB) Down(ctx context.Context) error {
	m.mu.Lock()
	done := m.down
	m.down = true
	m.mu.Unlock()
	if done {
		return nil
	}
	var errs []string
	for _, n := range m.nodes {
		if n == nil {
			continue
		}
		if err := m.run(ctx, n, "down"); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, l := range m.links {
		if l != nil {
			_ = l.Close()
		}
	}
	// Only what StartMariaDBReplica made: dir may hold the caller's files.
	for _, n := range m.nodes {
		if n != nil {
			if err := os.RemoveAll(n.dir); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	_ = os.Remove(m.script.Path)
	_ = os.Remove(m.dir) // when empty
	if len(errs) > 0 {
		return fmt.Errorf("topology: %s down: %s", m.Name(), strings.Join(errs, "; "))
	}
	return nil
}

// run runs the script's action on node n.
func (m *MariaDB) run(ctx context.Context, n *mariadbNode, action string, args ...string) error {
	semi := "0"
	if m.semiSync {
		semi = "1"
	}
	sh := m.script
	sh.Env = append(os.Environ(),
		"SIMBA_TESTENV_DIR="+n.dir,
		fmt.Sprintf("SIMBA_TESTENV_MYSQL_PORT=%d", n.port),
		fmt.Sprintf("NODE_ID=%d", n.id),
		"NODE_SEMISYNC="+semi,
		"NODE_PASSWORD="+m.password,
	)
	if _, err := sh.Run(ctx, append([]string{action}, args...)...); err != nil {
		return fmt.Errorf("topology: mariadb node %d: %w", n.id, err)
	}
	return nil
}
