package servers

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
)

// Kill sends SIGKILL to the server process at once, from this process,
// without the script's start-up time: a fault measured from the moment
// it strikes. The server's data stays where it was; Fresh or Down clean
// up after it.
func (s *Server) Kill() error {
	pid, err := ReadPid(filepath.Join(s.dir, "state", s.Kind, "pid"))
	if err != nil {
		return fmt.Errorf("servers: kill %s: %w", s.Kind, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("servers: kill %s: %w", s.Kind, err)
	}
	return nil
}

// Fresh kills the server if it runs, deletes its data and starts it again
// empty on its port; it returns once the server answers.
func (s *Server) Fresh(ctx context.Context) error { return s.do(ctx, "fresh") }
