package sqltest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simba "github.com/simba-go/simba/core"
)

// startPooler starts a pgbouncer in pool_mode mode in front of the server
// of SIMBA_TEST_POSTGRES_URL, on a free loopback port, stopped when t
// ends, and returns the URL that reaches the server through it. It skips
// the test when pgbouncer is not installed (tools/testenv/tools installs
// it) or the variable is unset.
func startPooler(t *testing.T, mode string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts pgbouncer")
	}
	raw := os.Getenv("SIMBA_TEST_POSTGRES_URL")
	if raw == "" {
		t.Skip("SIMBA_TEST_POSTGRES_URL is not set")
	}
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer" // Debian's, outside some PATHs
		if _, err := os.Stat(bin); err != nil {
			t.Skip("pgbouncer is not installed (tools/testenv/tools installs it)")
		}
	}
	u := pgURL(t, raw)
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatalf("SIMBA_TEST_POSTGRES_URL: %v", err)
	}
	server := fmt.Sprintf("host=%s port=%s", host, port)
	if pw, ok := u.User.Password(); ok {
		server += " password=" + pw
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir := t.TempDir()
	// The postgres user must reach it (t.TempDir's parent is private).
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	_ = os.Chmod(dir, 0o755)
	ini := fmt.Sprintf(`[databases]
* = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s/users.txt
pool_mode = %s
max_client_conn = 500
default_pool_size = 20
logfile = %s/log
pidfile = %s/pid
ignore_startup_parameters = extra_float_digits
`, server, listen, dir, mode, dir, dir)
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", u.User.Username())), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := []string{bin, "-d", filepath.Join(dir, "pgbouncer.ini")}
	// pgbouncer refuses to run as root.
	if me, err := user.Current(); err == nil && me.Uid == "0" {
		for _, f := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "users.txt")} {
			if err := chownTo(f, "postgres"); err != nil {
				t.Skipf("pgbouncer must run as another user than root: %v", err)
			}
		}
		cmd = append([]string{"runuser", "-u", "postgres", "--"}, cmd...)
	}
	if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("pgbouncer: %v\n%s\n%s", err, out, log)
	}
	t.Cleanup(func() {
		pid, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err == nil {
			_ = exec.Command("kill", strings.TrimSpace(string(pid))).Run()
		}
		for i := 0; i < 50; i++ {
			if _, err := os.Stat(filepath.Join(dir, "pid")); errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("pgbouncer did not stop")
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", listen))
		if err == nil {
			_ = c.Close()
			break
		}
		if i == 50 {
			t.Fatalf("pgbouncer does not listen: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d", listen)
	return u.String()
}

func chownTo(path, name string) error {
	return exec.Command("chown", name+":", path).Run()
}

// TestPostgresThroughTransactionPooler runs the conformance suite and the tests of
// concurrent calls through pgbouncer in transaction mode, where each
// transaction may run on another server connection. Every statement of
// the backend is one transaction (a batch with its lock_timeout, the
// keep-alive's BEGIN ... COMMIT), and nothing depends on session state, so
// the suite passes, once pgx prepares no named statement
// (default_query_exec_mode=exec): its statement cache would find each
// name prepared, or missing, on whichever server connection it got.
func TestPostgresThroughTransactionPooler(t *testing.T) {
	pooled := startPooler(t, "transaction")
	t.Run("StatementCache", func(t *testing.T) {
		// The second backend's connection gets the server connection
		// the first one left idle, with its prepared statements.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		for range 2 {
			var b *simbapg.Backend
			b, err = simbapg.Open(ctx, pooled, simbapg.Options{TablePrefix: "simba_pooler_", Migrate: true})
			if err != nil {
				break
			}
			defer b.Close()
		}
		if err == nil {
			t.Fatal("two backends opened through a transaction pooler with pgx's statement cache")
		}
		if !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
			t.Errorf("Open through a transaction pooler with pgx's statement cache: %v, want the fix named", err)
		}
	})
	t.Run("WatchRefused", func(t *testing.T) {
		// The listening connection's LISTEN runs on a server connection
		// that then serves others: its probe never arrives, and watches
		// are refused with ErrNotSupported once the backend knows.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := simbapg.Open(ctx, pooled+"&default_query_exec_mode=exec", simbapg.Options{TablePrefix: "simba_pooler_", Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.WatchRelease(ctx, "job"); err != nil {
			t.Fatalf("the first watch, while the backend finds out: %v", err)
		}
		if _, err := b.WatchRelease(ctx, "job"); !errors.Is(err, simba.ErrNotSupported) {
			t.Fatalf("a watch through a transaction pooler: %v, want ErrNotSupported", err)
		}
	})
	h := pgHarness()
	h.Server = func(testing.TB, string) string { return pooled + "&default_query_exec_mode=exec" }
	h.Only = func(name string) bool {
		switch name {
		case "Conformance", "TakeOverWaitsForRenewalInFlight", "SweepRacesAcquire":
			return true
		}
		return false
	}
	Run(t, h)
}
