// Package simbazk is the Zookeeper backend of Simba: leader election and
// distributed locks whose sessions are Zookeeper sessions.
//
// The model maps one to one onto Zookeeper (spec R-BE-3):
//
//   - A Simba session is a Zookeeper session on a connection of its own.
//     [Backend.OpenSession] dials it with the lease as session timeout; the
//     server may negotiate a shorter one (maxSessionTimeout), which the
//     grant reports so that the engine renews faster (R-DL-5). The
//     [simba.SessionID] is the Zookeeper session id in hex (R-SES-2).
//   - A lease is the ephemeral node Root/leases/{name}; its fencing token
//     is the node's czxid, strictly increasing but not consecutive. The
//     requests of an acquire and of a release of one name by one session
//     never interleave (a lock per name in the session), so that a release
//     never deletes the node of the term a concurrent acquire started.
//   - The data of a lease node is the identity of the session that created
//     it ([Backend.OpenSessionAs]), written by the acquire's own request;
//     [Backend.Holder] reads the node (owner, czxid, creation time, data)
//     with one request over the backend's read connection, so that asking
//     who holds a lease needs no session and renews none.
//   - Slot i of semaphore name is the lease name:i. The number of permits
//     recorded for the semaphore is the data of the persistent node
//     Root/permits/{name}; [Backend.AcquirePermit] sets it, guarded by the
//     version it read, in the multi that creates the slot's node, so of two
//     grants decided on one read only one succeeds.
//   - A group member is the ephemeral node Root/groups/{group}/{session}.
//   - A release is announced through a watch on the lease node
//     ([Backend.WatchRelease]), which fires on a clean release and on the
//     deletion that follows the owner's session expiry (R-CAND-2). Backends
//     waiting for a name queue under Root/waiters/{name} and only the first
//     watches the lease node, so a release wakes one of them; its waiting
//     session sends its create as the watch fires, and the engine's Acquire
//     then finds the outcome staged.
//
// Only Simba's own calls renew a session: the Zookeeper client's
// background pings are not sent, so a session that is no longer kept alive
// expires after its negotiated timeout even while the process lives, as
// the backend contract requires. Once Zookeeper reports a session expired,
// its connection is closed and never allowed to open a replacement
// session: every later call with that SessionID returns
// [simba.ErrSessionExpired] (R-SES-3).
//
// Every wait is bounded: calls by their context, the connect of a session
// by one response timeout per server (2/3 of the session timeout), and
// [Backend.Close] by about a second whatever the servers do. [Open] checks
// that a server answers before it returns; importing the package registers
// zk:// URLs ([ParseURL]) with simba.OpenBackend.
//
// Lease names are Simba names ([simba.ValidateName]): 1-128 characters of
// [A-Za-z0-9._:-], other than "." and "..". Each is a valid Zookeeper path
// component as it is, so a name and its node path map one to one without
// escaping.
package simbazk
