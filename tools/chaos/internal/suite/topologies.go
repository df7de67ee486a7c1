package suite

import (
	"context"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/history"
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
				return started(topology.StartPostgresReplica(ctx, dir, topology.PostgresOptions{Sync: sync}))
			}})
	}
	for name, semi := range map[string]bool{"mysql-async": false, "mysql-semisync": true} {
		add(topology.Entry{Name: name, Backend: servers.MySQL,
			Start: func(ctx context.Context, dir string) (topology.Topology, error) {
				return started(topology.StartMariaDBReplica(ctx, dir, topology.MariaDBOptions{SemiSync: semi}))
			}})
	}
	// Sentinel runs with min_replicas=1, its durable setting: without it a
	// SENTINEL FAILOVER loses the keep-alives the old primary took while
	// the replica was promoted, and terms overlap (backend-redis/README.md,
	// "Replicated Redis"). A cluster's failover loses nothing.
	redis := map[string]struct {
		start func(context.Context, string, topology.RedisOptions) (*topology.Redis, error)
		opts  topology.RedisOptions
	}{
		"redis-sentinel-wait": {topology.StartRedisSentinel, topology.RedisOptions{MinReplicas: 1}},
		"redis-cluster":       {topology.StartRedisCluster, topology.RedisOptions{}},
	}
	for name, r := range redis {
		add(topology.Entry{Name: name, Backend: servers.Redis,
			Start: func(ctx context.Context, dir string) (topology.Topology, error) {
				return started(r.start(ctx, dir, r.opts))
			}})
	}
	add(topology.Entry{Name: "zk-ensemble", Backend: servers.ZK,
		Start: func(ctx context.Context, dir string) (topology.Topology, error) {
			e, err := topology.StartZKEnsemble(ctx, dir, topology.ZKOptions{})
			if err != nil {
				return nil, err
			}
			return zkStrikes{e}, nil
		}})
}

// started returns the topology a start function returned, or a nil
// Topology with its error: not a nil *T, which would make a non-nil one.
func started[T topology.Topology](t T, err error) (topology.Topology, error) {
	if err != nil {
		return nil, err
	}
	return t, nil
}

// zkStrikes is the ensemble with the moment its last fault struck (the
// SIGKILL of a member, after finding which): a Striker.
type zkStrikes struct{ *topology.ZKEnsemble }

var _ Striker = zkStrikes{}

// The Redis topologies tell when their faults struck themselves.
var _ Striker = (*topology.Redis)(nil)

// FaultAt converts the ensemble's CLOCK_MONOTONIC reading of its last
// SIGKILL to a time.Time.
func (z zkStrikes) FaultAt() time.Time {
	kill := z.Last().Kill
	if kill == 0 {
		return time.Time{}
	}
	return time.Now().Add(-time.Duration(history.Mono() - kill))
}
