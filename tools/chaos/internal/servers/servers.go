// Package servers runs the robustness suite's own server instances, one
// per backend, on free loopback ports and in a state directory of their
// own, with the start functions of tools/testenv/lib.sh. The shared test
// servers are never touched: the suite stops and restarts only these.
package servers

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

//go:embed server.sh
var script []byte

// ErrNoTestenv is returned by Start when tools/testenv/lib.sh cannot be
// found above the working directory.
var ErrNoTestenv = errors.New("servers: tools/testenv/lib.sh not found above the working directory")

// Kinds of servers, as tools/testenv names them.
const (
	Redis    = "redis"
	Postgres = "postgres"
	MySQL    = "mysql"
	ZK       = "zk"
)

// Server is one private instance.
type Server struct {
	Kind string
	Port int
	dir  string
	lib  string
	sh   string
	env  []string
}

// Start makes a state directory under base and starts kind there, empty,
// on a free port; it returns once the server answers.
func Start(ctx context.Context, base, kind string) (*Server, error) {
	lib, err := FindLib()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(base, kind)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	// The postgres user must reach the state directory.
	for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, base); d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	sh := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(sh, script, 0o755); err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	spare, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Kind: kind, Port: port, dir: dir, lib: lib, sh: sh}
	s.env = append(os.Environ(),
		"SIMBA_TESTENV_DIR="+filepath.Join(dir, "state"),
		fmt.Sprintf("SIMBA_TESTENV_%s_PORT=%d", strings.ToUpper(kind), port),
		fmt.Sprintf("SIMBA_TESTENV_ZK_CAPPED_PORT=%d", spare),
	)
	if err := s.do(ctx, "fresh"); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// URL is the backend URL of the server for simba.OpenBackend.
func (s *Server) URL() string {
	switch s.Kind {
	case Redis:
		return "redis://" + s.Addr() + "/0"
	case Postgres:
		return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable"
	case MySQL:
		return "mysql://root@" + s.Addr() + "/simba_test"
	default:
		return "zk://" + s.Addr()
	}
}

// Stop stops the server, keeping its data.
func (s *Server) Stop(ctx context.Context) error { return s.do(ctx, "stop") }

// Resume starts the server again on its data and waits until it answers.
func (s *Server) Resume(ctx context.Context) error { return s.do(ctx, "resume") }

// Down stops the server and deletes its data.
func (s *Server) Down(ctx context.Context) error { return s.do(ctx, "down") }

func (s *Server) do(ctx context.Context, action string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", s.sh, s.lib, action, s.Kind)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("servers: %s %s: %w\n%s", action, s.Kind, err, out)
	}
	return nil
}

// FindLib returns the path of tools/testenv/lib.sh in the first directory
// above the working directory that has one, or ErrNoTestenv.
func FindLib() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	for {
		lib := filepath.Join(dir, "tools", "testenv", "lib.sh")
		if _, err := os.Stat(lib); err == nil {
			return lib, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoTestenv
		}
		dir = parent
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("servers: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
