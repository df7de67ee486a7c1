package suite

import (
	"context"

	"github.com/simba-go/simba/tools/chaos/internal/servers"
	"github.com/simba-go/simba/tools/chaos/internal/topology"
)

// The topologies of package topology, in the settings the robustness
// suite runs them, registered by name unless their own files register
// them (package topology's init functions run before this one).
func init() {
	add := func(e topology.Entry) {
		if !topology.Registered(e.Name) {
			topology.Register(e)
		}
	}
	for name, sync := range map[string]bool{"postgres-async": false, "postgres-sync": true} {
		add(topology.Entry{Name: name, Backend: servers.Postgres,
			Start: func(ctx context.Context, dir string) (topology.Topology, error) {
				p, err := topology.StartPostgresReplica(ctx, dir, topology.PostgresOptions{Sync: sync})
				if err != nil {
					return nil, err
				}
				return p, nil
			}})
	}
}
