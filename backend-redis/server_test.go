package simbaredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// privateServer is a redis-server started by one test, for faults that
// would disturb the shared test server: restarts, killed connections,
// passwords, eviction policies. Like every server test it needs
// SIMBA_TEST_REDIS_URL (the sign that Redis tests are wanted) and the
// redis-server binary.
type privateServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
}

// startServer starts a private server with extra redis-server arguments
// (such as "--requirepass", "x") and stops it when the test ends.
func startServer(t testing.TB, extra ...string) *privateServer {
	t.Helper()
	serverURL(t)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	s := &privateServer{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), args: extra}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *privateServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

func (s *privateServer) start() {
	s.t.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "log"),
	}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		// A password-protected server answers NOAUTH: it is up.
		if err == nil || redis.HasErrorPrefix(err, "NOAUTH") {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			s.t.Fatalf("redis-server on port %d not ready: %v\n%s", s.port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server (no persistence: its data is gone).
func (s *privateServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// restart kills the server and starts it again on the same port, empty.
func (s *privateServer) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}
