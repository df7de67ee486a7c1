package simbamysql

import (
	"context"
	"database/sql"
	"strings"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The codes of the warnings OpenSession returns for a server setup that
// breaks a guarantee of the backend.
const (
	// WarnGalera: the server is a node of a Galera cluster (wsrep_on is
	// ON).
	WarnGalera = "galera-node"
	// WarnIsolation: the connections run at READ UNCOMMITTED.
	WarnIsolation = "read-uncommitted"
)

// setupCheckTimeout bounds the statement of the setup warnings, which
// runs once the session is open.
const setupCheckTimeout = 2 * time.Second

// setupQuery reads, in one round trip and on MySQL 8 as on MariaDB, the
// session values of the variables the setup warnings look at: a name the
// server does not have is simply absent.
const setupQuery = "SHOW VARIABLES WHERE Variable_name IN ('wsrep_on', 'tx_isolation', 'transaction_isolation')"

// serverVariables runs setupQuery on db. Tests replace it to fake a
// variable that a real server here cannot have (wsrep_on = ON needs a
// Galera cluster).
var serverVariables = func(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, setupQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		vars[strings.ToLower(k)] = v
	}
	return vars, rows.Err()
}

// Warnings reads the server's variables within setupCheckTimeout
// (Dialect.Warnings).
func (s *dialect) Warnings(ctx context.Context) []simba.Warning {
	ctx, cancel := context.WithTimeout(ctx, setupCheckTimeout)
	defer cancel()
	return setupWarnings(ctx, s.db)
}

// setupWarnings reads the server's variables and returns what they break.
// A server it cannot ask gets no warning: the session was opened, and the
// next one asks again.
func setupWarnings(ctx context.Context, db *sql.DB) []simba.Warning {
	vars, err := serverVariables(ctx, db)
	if err != nil {
		return nil
	}
	var out []simba.Warning
	if on := vars["wsrep_on"]; strings.EqualFold(on, "ON") || on == "1" {
		out = append(out, simba.Warning{Code: WarnGalera, Message: "the server is a Galera cluster node (wsrep_on = ON): " +
			"row locks are not certified across nodes, so a take-over on one node and the owner's " +
			"keep-alive on another can both commit and two sessions hold the lease; " +
			"use an asynchronous or semi-synchronous primary, or send every node to one Galera node"})
	}
	level := vars["transaction_isolation"]
	if level == "" {
		level = vars["tx_isolation"]
	}
	if strings.EqualFold(strings.ReplaceAll(level, " ", "-"), "READ-UNCOMMITTED") {
		out = append(out, simba.Warning{Code: WarnIsolation, Message: "the connections run at READ UNCOMMITTED: " +
			"the backend's plain reads see rows of transactions that may roll back, so Holder can " +
			"report a holder that never held the lease and a keep-alive can drop a lease its session " +
			"still holds (the term ends as TAKEN_OVER); exclusion and tokens hold (locking reads); " +
			"use READ COMMITTED, REPEATABLE READ or SERIALIZABLE"})
	}
	return out
}
