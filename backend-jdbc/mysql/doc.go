// Package simbamysql is the MySQL and MariaDB backend of Simba: sessions
// and leases kept in ordinary InnoDB tables of a MySQL 8 or MariaDB 10.11+
// database that you already run, reached through go-sql-driver/mysql. It
// links that driver and no other; PostgreSQL is the package simbapg of this
// module.
//
// A node's session is one row of <prefix>session whose expires_at is moved
// forward by every keep-alive, and which stores the identity of the client
// that opened it; a lease is one row of <prefix>lease holding the owning
// session, a fencing token and when the current term began. Backend.Holder
// reads both in one statement to tell who holds a lease. The token grows
// by one with every term; Backend.Sweep deletes the rows of idle names and
// raises a floor that a name inserted again starts above, so tokens never
// go back while the database keeps its committed data. A lease is free when it has no owner,
// when its owner's session has expired, or when that session no longer
// exists. Group membership is a row of <prefix>group_member per (group,
// session) and dies with the session. A semaphore's permits are the
// leases of its slots (simba.PermitName), and a row of <prefix>semaphore,
// never deleted, records the permits it was last granted under and the
// highest token of its slots: Backend.AcquirePermit locks that row, checks
// the permits and takes the slot in one transaction, with a token above
// the row's.
//
// Every time comparison uses the database clock (UTC_TIMESTAMP(6), into
// UTC DATETIME(6) columns), never the client's, and the backend reports
// durations rather than instants, so client and server clocks are never
// compared (the one instant it reports, when a holder's term began, is for
// people to read). MySQL fixes that clock when a statement starts, so nothing is
// decided from a row a statement may have waited for: a keep-alive locks
// its session row before renewing it in a later statement, and a won
// acquire is confirmed by a later statement. Every statement is
// parameterised and prepared once per connection; the only identifiers
// spliced into SQL come from the validated table prefix.
//
// Build a backend over a *sql.DB you own with [New], or let [Open] create
// and own one from a URL or DSN. A URL may list a primary and its
// replicas, mysql://user:pass@h1:3306,h2:3306/db: each new connection goes
// to the first host whose @@read_only is 0, so that after a replica is
// promoted the backend finds it without a restart ([ErrNoWritableHost]
// when no host is writable). [Backend.OpenSession] warns, through
// simba.SessionGrant.Warnings, of a Galera node ([WarnGalera]) and of
// connections at READ UNCOMMITTED ([WarnIsolation]). Tables are created, or brought up to date
// from an earlier version's, by [Options.Migrate] or by a DBA from the
// script that [Schema] returns: numbered, idempotent migration steps.
// Without them a call fails with a [*MissingTableError] or an
// [*OutdatedSchemaError] naming what to run. [Fence] writes to your
// own tables only while the writer's fencing token is the highest seen.
package simbamysql
