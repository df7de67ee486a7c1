// Package topology runs replicated server topologies on loopback for the
// robustness suite and its measurements: a Redis primary with a replica
// and sentinels, a Redis Cluster, a Zookeeper ensemble, a PostgreSQL or
// MariaDB primary with a streaming replica. Every server is a separate
// process started from the Debian packages with the functions of
// tools/testenv/lib.sh, on free ports and in a state directory of its own;
// the shared test servers are never touched.
//
// A Topology names the faults it can inject (a primary killed, the
// ensemble's leader killed, a replica promoted, a sentinel cut off), and
// injects them one at a time while nodes contend on it. Its URL is the one
// every node opens, through whatever the backend needs to find the
// current primary (sentinels, every cluster node, every ensemble member, a
// multi-host URL).
package topology

import (
	"context"
	"errors"
)

// ErrUnknownFault is matched by the error of Inject for a fault the
// topology does not have.
var ErrUnknownFault = errors.New("topology: unknown fault")

// The faults, by the names the reports use. A topology injects the ones
// that apply to it.
const (
	// PrimaryKill kills the primary with SIGKILL and lets the topology's
	// own mechanism (sentinels, cluster, manual promotion) elect another.
	// The killed server is started again, empty or on its data as the
	// topology says, and rejoins as a replica.
	PrimaryKill = "primary-kill"
	// Failover asks for a clean failover (SENTINEL FAILOVER, CLUSTER
	// FAILOVER), with the primary alive.
	Failover = "failover"
	// LeaderKill kills the Zookeeper ensemble's leader with SIGKILL, then
	// starts it again.
	LeaderKill = "leader-kill"
	// FollowerKill kills the ensemble member the clients are connected to
	// (a follower), then starts it again.
	FollowerKill = "follower-kill"
	// Promote promotes the replica to primary and fences the old primary
	// off (it is stopped, and rebuilt as a replica of the new one).
	Promote = "replica-promote"
	// SentinelPartition cuts one sentinel off from the others and from the
	// servers for a while.
	SentinelPartition = "sentinel-partition"
	// RollingRestart restarts each server in turn; with servers without
	// persistence a restarted node comes back empty and resyncs.
	RollingRestart = "rolling-restart"
	// EmptyPromotion restarts the replica empty and kills the primary
	// while the replica's first full sync is still under way, so that an
	// empty node is promoted: every key is lost.
	EmptyPromotion = "empty-promotion"
)

// Topology is one running set of servers.
type Topology interface {
	// Name names the topology and its setting in reports, for example
	// "redis-sentinel" or "postgres-sync".
	Name() string
	// Backend is the kind of backend nodes open, as tools/testenv names
	// it: redis, postgres, mysql or zk.
	Backend() string
	// URL is the simba.OpenBackend URL of the topology.
	URL() string
	// Faults lists the faults Inject accepts, in the order a run injects
	// them.
	Faults() []string
	// Inject injects one fault and returns once the topology serves
	// writes again (a new primary is in place, the killed server is
	// started again), or with an error when it does not within its own
	// bound. It records nothing: the caller records the fault's begin and
	// end around the call.
	Inject(ctx context.Context, fault string) error
	// TokensMayGoBack reports whether the backend's documentation allows
	// a token to go back on this topology (asynchronous replication
	// without the durable option): the run counts such regressions
	// instead of failing on them.
	TokensMayGoBack() bool
	// Down stops every server and deletes their data.
	Down(ctx context.Context) error
}
