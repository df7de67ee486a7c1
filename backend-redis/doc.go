// Package simbaredis is the Redis backend of Simba: sessions, leases and
// group memberships kept in Redis 7 (standalone, Sentinel, or Cluster with a
// hash-tagged key prefix) through go-redis v9.
//
// A session is a hash simba:session:<id> that expires (PX) one lease after
// its last keep-alive; the id is 128 random bits and never reused, and the
// hash also keeps the identity of the client that opened it
// (OpenSessionAs). A lease is a hash simba:lease:<name> holding the owning
// session, the token of its last term and the server time the term began;
// it never expires. A new term's token is the greater of the previous
// token + 1 and the server's TIME in microseconds, so tokens keep growing
// even after the server lost its data, within the bound of the clock skew
// between Redis hosts (ADR 0020). Holder reads who holds a lease: the session
// the lease hash names, if that session's key still exists. Every operation is one Lua
// script that Redis runs atomically, reading time from the server's TIME,
// never from the client's clock; Acquire, Release and KeepAlive therefore
// cost one round trip each, whatever the number of leases a session holds.
// A semaphore's permits are the leases of its slots; AcquirePermit takes
// one in one script that also keeps the semaphore's record
// simba:permits:<name> (its number of permits and highest token, never
// removed), which refuses a different number while a slot is held.
// Releases and session closes are published on simba:released, and
// WatchRelease turns them into immediate take-overs on the other nodes.
//
// What can go wrong in production, and what to run instead when fencing
// must hold across a failover, is in the module's README: asynchronous
// replication can lose a recent keep-alive or acquire.
//
// Use Open to connect from a URL (the Backend owns the connection:
// redis:// for one server, redis+sentinel:// through sentinels,
// redis+cluster:// for a cluster, rediss forms for TLS), or New to wrap a
// go-redis client you already have (it stays yours). Then hand the Backend
// to simba.New. Options.MinReplicas makes acquires and keep-alives wait
// for replicas (ADR 0021).
package simbaredis
