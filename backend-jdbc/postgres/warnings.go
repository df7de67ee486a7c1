package simbapg

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	simba "github.com/simba-go/simba/core"
)

// The codes of the warnings OpenSession returns for a server setup under
// which a token handed out can be handed out again.
const (
	// WarnCommitNotDurable: synchronous_commit is off for the backend's
	// connections. PostgreSQL then acknowledges a commit before its WAL
	// is written, and a crash of the server loses the last commits.
	WarnCommitNotDurable = "postgres-commit-not-durable"
	// WarnAsyncReplication: the server streams its WAL to standbys and no
	// commit waits for one (synchronous_standby_names is empty, or
	// synchronous_commit is off or local). A standby promoted after the
	// primary is lost may lack the last commits.
	WarnAsyncReplication = "postgres-async-replication"
)

// setupQuery reads, in one round trip, what the setup warnings look at:
// the session's synchronous_commit, the server's
// synchronous_standby_names, and the number of WAL senders that stream to
// a physical standby (a logical slot's sender, a change-data-capture
// reader, is no failover target). Any role may read these: without
// pg_read_all_stats, pg_stat_replication still shows each sender's pid.
const setupQuery = `SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
	(SELECT count(*) FROM pg_stat_replication r WHERE r.pid NOT IN
		(SELECT s.active_pid FROM pg_replication_slots s WHERE s.slot_type = 'logical' AND s.active_pid IS NOT NULL))`

// serverSetup is what setupQuery reads.
type serverSetup struct {
	syncCommit   string // synchronous_commit
	syncStandbys string // synchronous_standby_names
	standbys     int64  // WAL senders to physical standbys
}

// readSetup runs setupQuery on pool.
func readSetup(ctx context.Context, pool *pgxpool.Pool) (serverSetup, error) {
	var s serverSetup
	err := pool.QueryRow(ctx, setupQuery).Scan(&s.syncCommit, &s.syncStandbys, &s.standbys)
	return s, err
}

// Warnings reads the server's setup (Dialect.Warnings); a failed read
// gives none.
func (s *dialect) Warnings(ctx context.Context) []simba.Warning {
	setup, err := readSetup(ctx, s.pool)
	if err != nil {
		return nil
	}
	return setup.warnings()
}

// warnings returns what s breaks.
func (s serverSetup) warnings() []simba.Warning {
	var out []simba.Warning
	commit := strings.ToLower(strings.TrimSpace(s.syncCommit))
	if commit == "off" {
		out = append(out, simba.Warning{Code: WarnCommitNotDurable, Message: "synchronous_commit is off for the backend's connections: " +
			"the server acknowledges a commit before writing its WAL, and a crash of the server loses the last " +
			"ones (up to three times wal_writer_delay), tokens included: a token already handed out can be " +
			"handed out again; set synchronous_commit = on for the role or database the backend uses"})
	}
	if s.standbys > 0 && (strings.TrimSpace(s.syncStandbys) == "" || commit == "off" || commit == "local") {
		why := "synchronous_standby_names is empty"
		if strings.TrimSpace(s.syncStandbys) != "" {
			why = "synchronous_commit is " + commit
		}
		out = append(out, simba.Warning{Code: WarnAsyncReplication, Message: fmt.Sprintf("the server streams its WAL to %d "+
			"standby(s) and no commit waits for one (%s): a standby promoted after the primary is lost may "+
			"lack the last commits, and a token already handed out can be handed out again; set "+
			"synchronous_standby_names and synchronous_commit = on (see the README, Replicas and failover)",
			s.standbys, why)})
	}
	return out
}
