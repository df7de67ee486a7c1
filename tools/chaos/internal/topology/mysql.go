package topology

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
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
}

// MariaDB is a MariaDB primary and one replica with GTID replication
// (log_bin, server_id, gtid_strict_mode, MASTER_USE_GTID=slave_pos), on
// two free loopback ports. Its URL is the multi-host URL of simbamysql,
// which connects to the host whose @@read_only is 0; it authenticates as
// a user without READ ONLY ADMIN, whom read_only stops.
type MariaDB struct {
	dir, lib, sh string
	semiSync     bool
	password     string
	nodes        [2]*mariadbNode

	mu        sync.Mutex
	primary   int // index into nodes
	promotion time.Duration
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
	lib, err := mariadbLib()
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 12)
	_, _ = rand.Read(secret)
	m := &MariaDB{dir: dir, lib: lib, semiSync: opts.SemiSync, password: hex.EncodeToString(secret)}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	m.sh = filepath.Join(dir, "mysql.sh")
	if err := os.WriteFile(m.sh, mariadbScript, 0o755); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	for i := range m.nodes {
		port, err := mariadbFreePort()
		if err != nil {
			return nil, err
		}
		m.nodes[i] = &mariadbNode{id: i + 1, port: port, dir: filepath.Join(dir, fmt.Sprintf("node%d", i+1))}
	}
	if err := m.run(ctx, m.nodes[0], "primary"); err != nil {
		_ = m.Down(ctx)
		return nil, err
	}
	if err := m.attach(ctx, m.nodes[1], m.nodes[0]); err != nil {
		_ = m.Down(ctx)
		return nil, err
	}
	return m, nil
}

// Name is "mysql-async" or "mysql-semisync".
func (m *MariaDB) Name() string {
	if m.semiSync {
		return "mysql-semisync"
	}
	return "mysql-async"
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

// Faults is replica-promote only.
func (m *MariaDB) Faults() []string { return []string{Promote} }

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

// LastPromotion is how long the last Inject took from the SIGKILL of the
// primary to the replica accepting writes.
func (m *MariaDB) LastPromotion() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.promotion
}

// Inject of replica-promote kills the primary with SIGKILL, promotes the
// replica by hand (every event it received applied, then STOP SLAVE,
// RESET SLAVE ALL, read_only=OFF), and rebuilds the old primary empty as
// a replica of the new one (its data may hold terms the new primary never
// received: it cannot rejoin on it). It returns once that replica has
// caught up, so that the next injection can promote it back.
func (m *MariaDB) Inject(ctx context.Context, fault string) error {
	if fault != Promote {
		return fmt.Errorf("%w: %q on %s", ErrUnknownFault, fault, m.Name())
	}
	m.mu.Lock()
	old, next := m.nodes[m.primary], m.nodes[1-m.primary]
	m.mu.Unlock()
	start := time.Now()
	if err := m.run(ctx, old, "kill"); err != nil {
		return err
	}
	if err := m.run(ctx, next, "promote"); err != nil {
		return err
	}
	m.mu.Lock()
	m.promotion = time.Since(start)
	m.primary = 1 - m.primary
	m.mu.Unlock()
	// A new server_id for the rebuilt node: its GTIDs must not be taken
	// for the old primary's.
	old.id += 2
	return m.attach(ctx, old, next)
}

// attach rebuilds replica empty, replicating from primary, and waits
// until it has caught up.
func (m *MariaDB) attach(ctx context.Context, replica, primary *mariadbNode) error {
	if err := m.run(ctx, replica, "replica", fmt.Sprint(primary.port)); err != nil {
		return err
	}
	return m.run(ctx, replica, "caught-up", fmt.Sprint(primary.port))
}

// Down stops both servers and deletes their data.
func (m *MariaDB) Down(ctx context.Context) error {
	var errs []string
	for _, n := range m.nodes {
		if n == nil {
			continue
		}
		if err := m.run(ctx, n, "down"); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := os.RemoveAll(m.dir); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("topology: %s down: %s", m.Name(), strings.Join(errs, "; "))
	}
	return nil
}

func (m *MariaDB) run(ctx context.Context, n *mariadbNode, action string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	semi := "0"
	if m.semiSync {
		semi = "1"
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{m.sh, m.lib, action}, args...)...)
	cmd.Env = append(os.Environ(),
		"SIMBA_TESTENV_DIR="+n.dir,
		fmt.Sprintf("SIMBA_TESTENV_MYSQL_PORT=%d", n.port),
		fmt.Sprintf("NODE_ID=%d", n.id),
		"NODE_SEMISYNC="+semi,
		"NODE_PASSWORD="+m.password,
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.ReplaceAll(string(out), m.password, "********")
		return fmt.Errorf("topology: mariadb node %d %s: %w\n%s", n.id, action, err, msg)
	}
	return nil
}

// mariadbLib finds tools/testenv/lib.sh above the working directory.
func mariadbLib() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("topology: %w", err)
	}
	for {
		lib := filepath.Join(dir, "tools", "testenv", "lib.sh")
		if _, err := os.Stat(lib); err == nil {
			return lib, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("topology: tools/testenv/lib.sh not found above %s", dir)
		}
		dir = parent
	}
}

func mariadbFreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("topology: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
