// Package servers runs the robustness suite's own server instances, one
// per backend, on free loopback ports and in a state directory of their
// own, with the start functions of tools/testenv/lib.sh. The shared test
// servers are never touched: the suite stops and restarts only these.
//
// Script, FreePorts and ReadPid are the host side every script of lib.sh
// needs; package topology runs its replicated servers with them too.
package servers

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

//go:embed server.sh
var script []byte

// Kinds of servers, as tools/testenv names them.
const (
	Redis    = "redis"
	Postgres = "postgres"
	MySQL    = "mysql"
	ZK       = "zk"
)

// Server is one private instance.
type Server struct {
	Kind   string
	Port   int
	dir    string
	script Script
}

// Start makes a state directory under base and starts kind there, empty,
// on a free port; it returns once the server answers.
func Start(ctx context.Context, base, kind string) (*Server, error) {
	dir := filepath.Join(base, kind)
	sh, err := WriteScript(dir, "server.sh", script)
	if err != nil {
		return nil, err
	}
	// The postgres user must reach the state directory.
	for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, base); d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	ports, err := FreePorts(2) // the server's, and a spare one for lib.sh's capped Zookeeper
	if err != nil {
		return nil, err
	}
	sh.Timeout = 5 * time.Minute
	sh.Env = append(os.Environ(),
		"SIMBA_TESTENV_DIR="+filepath.Join(dir, "state"),
		fmt.Sprintf("SIMBA_TESTENV_%s_PORT=%d", strings.ToUpper(kind), ports[0]),
		fmt.Sprintf("SIMBA_TESTENV_ZK_CAPPED_PORT=%d", ports[1]),
	)
	s := &Server{Kind: kind, Port: ports[0], dir: dir, script: sh}
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
	if _, err := s.script.Run(ctx, action, s.Kind); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	return nil
}
