package topology

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/servers"
)

// SingleDownTime is how long the primary-kill fault of redis-single
// leaves the server down: longer than the robustness suite's leases (1s),
// so that every term of the lost data has run out before anyone can win
// a term on the empty server.
const SingleDownTime = 2 * time.Second

func init() {
	Register(Entry{Name: "redis-single", Backend: servers.Redis, Start: StartSingle})
}

// single is one Redis server without persistence or replica, the
// topology the suite's own tests run on: its primary-kill fault is a
// SIGKILL, SingleDownTime down, and a start on the same port with no
// data. Every key is lost, the lease hashes and floors with the rest, as
// on a failover to a replica promoted empty.
type single struct {
	srv *servers.Server
}

// StartSingle starts redis-single under dir.
func StartSingle(ctx context.Context, dir string) (Topology, error) {
	srv, err := servers.Start(ctx, dir, servers.Redis)
	if err != nil {
		return nil, fmt.Errorf("topology: redis-single: %w", err)
	}
	return &single{srv: srv}, nil
}

func (s *single) Name() string     { return "redis-single" }
func (s *single) Backend() string  { return servers.Redis }
func (s *single) URL() string      { return s.srv.URL() }
func (s *single) Faults() []string { return []string{PrimaryKill} }

// TokensMayGoBack is false: the backend takes every token from at least
// the server's TIME in microseconds, which the restart does not put back
// (backend-redis README, "Failover and restarts"; ADR 0020).
func (s *single) TokensMayGoBack() bool { return false }

func (s *single) Down(ctx context.Context) error {
	if err := s.srv.Down(ctx); err != nil {
		return fmt.Errorf("topology: redis-single: %w", err)
	}
	return nil
}

func (s *single) Inject(ctx context.Context, fault string) error {
	if fault != PrimaryKill {
		return fmt.Errorf("%w: redis-single has no %q", ErrUnknownFault, fault)
	}
	if err := s.srv.Kill(); err != nil {
		return fmt.Errorf("topology: redis-single: %w", err)
	}
	t := time.NewTimer(SingleDownTime)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("topology: redis-single: %w", ctx.Err())
	}
	if err := s.srv.Fresh(ctx); err != nil { // the data deleted, started empty
		return fmt.Errorf("topology: redis-single: %w", err)
	}
	return nil
}
