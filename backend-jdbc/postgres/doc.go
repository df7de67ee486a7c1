// Package simbapg is the PostgreSQL backend of Simba: sessions and leases
// kept in ordinary tables of a PostgreSQL 14+ database that you already
// run, reached through pgx v5. It links pgx and no other database driver;
// MySQL and MariaDB are the package simbamysql of this module.
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
// Every time comparison uses the database clock (now() for rows read from
// the statement's snapshot, clock_timestamp() for rows read after waiting
// for their lock), never the client's, and the backend reports durations
// rather than instants, so client and server clocks are never compared
// (the one instant it reports, when a holder's term began, is for people
// to read). Every statement is parameterised; the only identifiers spliced into SQL
// come from the validated table prefix.
//
// Build a backend over a pool you own with [New], or let [Open] create and
// own one from a URL. Tables are created, or brought up to date from an
// earlier version's, by [Options.Migrate] or by a DBA from the script that
// [Schema] returns: numbered, idempotent migration steps. Without them a
// call fails with a [*MissingTableError] or an [*OutdatedSchemaError]
// naming what to run. [Fence] writes to your own tables
// only while the writer's fencing token is the highest seen.
package simbapg
