// Package simbasql is the SQL backend of Simba: sessions and leases kept in
// ordinary tables of a PostgreSQL 14+ or MySQL 8 / MariaDB 10.11+ database
// that you already run.
//
// A node's session is one row of <prefix>session whose expires_at is moved
// forward by every keep-alive; a lease is one row of <prefix>lease holding
// the owning session and a fencing token. Lease rows are never deleted, and
// the token grows by one with every term, so tokens never go back while the
// database keeps its committed data. A lease is free when it has no owner,
// when its owner's session has expired, or when that session no longer
// exists. Group membership is a row of <prefix>group_member per (group,
// session) and dies with the session.
//
// Every time comparison uses the database clock (now() and clock_timestamp()
// on PostgreSQL, UTC_TIMESTAMP(6) on MySQL), never the client's, and the
// backend reports durations rather than instants, so client and server
// clocks are never compared. A row read after waiting for its lock is
// compared with the time it was locked, not the time its statement started,
// so a session that expired during the wait is never renewed. Every statement is parameterised; the only
// identifiers spliced into SQL come from the validated table prefix.
//
// Build a backend from a client you own with [NewPostgres] or [NewMySQL], or
// let [Open] create and own one from a URL. Tables are created by
// [Options.Migrate] or by a DBA from the script that [Schema] returns.
package simbasql
