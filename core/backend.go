package simba

import (
	"context"
	"errors"
	"time"
)

// SessionID identifies one session incarnation on a backend. It is never
// reused: a random 128-bit value on SQL, Redis and the memory backend, the
// Zookeeper session id on Zookeeper (R-SES-2).
type SessionID string

// SessionGrant is a backend's answer to [Backend.OpenSession].
type SessionGrant struct {
	// ID is the new session's identifier.
	ID SessionID
	// Remaining is the validity the backend granted, measured by the
	// backend's own clock from when it handled the call. It may be less than
	// the lease asked for (a Zookeeper server caps it at maxSessionTimeout).
	Remaining time.Duration
	// Warnings lists what the backend found about its server's setup that
	// weakens a guarantee without failing the call: replicas a failover
	// could promote without the latest writes, a clustering mode the
	// statements were not made for, an eviction policy. The engine logs
	// each one and publishes it as an [EventBackendWarning], once per
	// session. A backend reports a warning again in every grant while it
	// holds, so that each new session's listeners hear of it.
	Warnings []Warning
}

// Warning is one setup problem a backend reports in a [SessionGrant].
type Warning struct {
	// Code names the kind of problem, stable across releases, for
	// filtering and alerts: each backend documents its codes (for example
	// simbaredis.WarnEvictionPolicy).
	Code string
	// Message says what was found and what it risks, in one line.
	Message string
}

func (w Warning) String() string { return w.Code + ": " + w.Message }

// KeepAliveRequest is what the engine sends with [Backend.KeepAlive]: the
// lease to renew for, and what it holds on the session, so that a backend
// needs no record of its own of what each session owns
// (docs/adr/0033-the-engine-owns-the-lease-state.md).
type KeepAliveRequest struct {
	// Lease is the validity to renew the session for, from now (backend
	// time).
	Lease time.Duration
	// Held maps every lease name the engine holds a term of on the session
	// to that term's token. The map is read-only: the engine never changes
	// a map it sent, and sends the same map again while Generation stays
	// the same.
	Held map[string]uint64
	// Generation changes whenever Held does, so that a backend may keep
	// what it derives from Held (a digest, a set of watches) from one call
	// to the next.
	Generation uint64
	// Unsure lists the names for which a call of the session ended without
	// its outcome (an error, a context that ended): it may have won or
	// released the lease, or may still do so. The reply reports in Owned
	// which of them the session owns, and at which token.
	Unsure []string
}

// KeepAliveReply is a backend's answer to [Backend.KeepAlive]. A backend
// may return the same Lost, Owned and Groups in several replies; the
// engine only reads them, and so must every other caller.
type KeepAliveReply struct {
	// Remaining is the session's validity after the renewal, measured by
	// the backend.
	Remaining time.Duration
	// Lost lists the names of the request's Held that the session does not
	// own at the token Held gives: freed or taken by something other than
	// the session's own calls (a row changed by hand, an evicted key, a
	// replica promoted without the latest writes). A backend checks every
	// name of Held at each keep-alive, or, to keep the keep-alive's cost
	// flat in the number of leases held, at least MinLeaseChecks of them,
	// varying which: a loss is then reported within
	// len(Held)/MinLeaseChecks keep-alives.
	Lost []string
	// Owned maps each name of the request's Unsure that the session owns
	// to the token of its term. A backend may report other leases of the
	// session too (one that reads its whole list anyway); the engine frees
	// every lease reported here that it does not hold.
	Owned map[string]uint64
	// Groups maps every group this session joined to the number of live
	// sessions that are members of it (this one included).
	Groups map[string]int
}

// MinLeaseChecks is the least number of the held leases that a keep-alive
// checks, when the engine holds that many (see KeepAliveReply.Lost).
const MinLeaseChecks = 5

// AcquireResult is a backend's answer to [Backend.Acquire].
type AcquireResult struct {
	// Won reports whether the session owns the lease after the call.
	Won bool
	// Token is the new term's fencing token when Won is true, zero
	// otherwise.
	Token uint64
}

// ErrSessionExpired is returned (possibly wrapped) by a backend when the
// session it was given has expired or is unknown. An expired session is
// never revived (R-SES-3).
var ErrSessionExpired = errors.New("simba: session expired")

// Backend is the service provider interface every backend implements: a
// small stateless adapter over a store that can expire sessions and keep
// per-name counters. Every timing decision is taken by the engine in this
// package; a backend only reports what the store says.
//
// Every method must be safe for concurrent use. The engine gives every call
// a context with a deadline (the renew period in effect, R-DL-2); a backend
// must return soon after the context is done. Errors other than
// [ErrSessionExpired] are treated as transient.
//
// The package backendtest in this module is the conformance suite every
// implementation must pass.
type Backend interface {
	// OpenSession creates a new session that expires after lease unless it
	// is kept alive. The identifier must never have been used before.
	OpenSession(ctx context.Context, lease time.Duration) (SessionGrant, error)

	// KeepAlive renews session s for req.Lease from now (backend time) and
	// reports, in one step, the remaining validity, which of the held
	// leases s lost, which of the unsure ones it owns, and the member
	// counts of the groups s joined. It returns ErrSessionExpired when s
	// has expired or was closed; it never revives such a session.
	KeepAlive(ctx context.Context, s SessionID, req KeepAliveRequest) (KeepAliveReply, error)

	// Acquire makes s the owner of the lease name when the lease is free
	// (never owned, released, or owned by an expired session) or already
	// owned by s. Each successful call starts a new term: the token is
	// greater than every token name has had before, on this backend, for
	// any session. When another live session owns the lease, Acquire
	// returns Won == false and no error. It returns ErrSessionExpired when s
	// has expired.
	//
	// The engine may call Acquire and Release of the same name on the same
	// session at the same time (a lock handed over to a waiter of the same
	// client, a win that is not adopted, an orphan released while a new
	// attempt starts), and it does not order them: it cannot, for a call
	// whose ctx ended while the backend still runs it. Each must therefore
	// be atomic with respect to the other and to the calls of every other
	// session, with the outcome of one order or the other: the term an
	// Acquire starts is never ended by a concurrent Release of an earlier
	// term, and a Release never ends a term another session won.
	Acquire(ctx context.Context, s SessionID, name string) (AcquireResult, error)

	// Release frees the lease name if s owns it with exactly token, and is
	// a no-op (nil error) otherwise, so a late release never frees a later
	// term (R-TERM-7). The comparison and the freeing are one atomic step
	// with respect to every Acquire of name, including one by s that runs
	// at the same time (see Acquire): a backend that checks the token and
	// then frees the lease with a second request must keep the session's
	// Acquire of name from running in between, even after ctx ends, unless
	// that second request itself compares the token.
	Release(ctx context.Context, s SessionID, name string, token uint64) error

	// JoinGroup makes s a member of group until it leaves or the session
	// ends, and returns the number of live members after the join. Joining
	// twice is the same as joining once.
	JoinGroup(ctx context.Context, s SessionID, group string) (members int, err error)

	// LeaveGroup ends the membership of s in group; leaving a group s is
	// not a member of is a no-op.
	LeaveGroup(ctx context.Context, s SessionID, group string) error

	// CloseSession ends s at once: every lease it owns becomes free and
	// every membership ends (R-SES-4). Closing an expired or unknown
	// session is a no-op.
	CloseSession(ctx context.Context, s SessionID) error
}

// ReleaseNotifier is implemented by backends that broadcast releases
// (Redis over pub/sub, Zookeeper through watches, PostgreSQL with
// LISTEN/NOTIFY, the memory backend), so that a candidate takes a cleanly
// released lease over at once (R-CAND-2). The engine discovers it with a
// type assertion.
type ReleaseNotifier interface {
	// WatchRelease returns a channel that is closed once the lease name may
	// have become free after the call: released, or its owner's session
	// ended. Spurious wake-ups are allowed; a missed one only delays the
	// candidate to its next regular attempt. The watch is dropped when ctx
	// is done, after which the channel may never be closed.
	WatchRelease(ctx context.Context, name string) (<-chan struct{}, error)
}

// HolderLister is implemented by backends that can list the leases held
// now (every backend of this repository), for operators and tools: what
// is held under a name prefix, by whom, since when. The engine never
// calls it; Client.ListHolders and Client.Holders do, and fail with
// ErrNotSupported without it (docs/adr/0028-listing-held-leases.md).
type HolderLister interface {
	// ListHolders returns one page of the leases whose names start with
	// q.Prefix and that a live session holds, at most q.Limit of them,
	// in name order within the page, each with the Holder that
	// HolderReader.Holder would report. Page.Next is the cursor of the
	// next page, to pass as q.Cursor with the same Prefix, and "" once the
	// listing is complete; a page may hold fewer than q.Limit leases, or
	// none, while Next is not "" (a backend bounds what one page reads).
	//
	// A walk of every page is not one snapshot: a lease held during the
	// whole walk is listed, one taken or freed meanwhile may or may not
	// be. Backends whose walk follows name order (memory, SQL, Zookeeper)
	// list a name at most once per walk; one that walks its store in an
	// order of its own (Redis SCAN) may list a name on two pages when the
	// store shrank during the walk. A cursor is opaque and valid only on
	// the backend that returned it; a malformed one, a prefix that
	// ValidatePrefix refuses or a limit outside [1, MaxListLimit] fail
	// with an error matching ErrInvalidArgument.
	ListHolders(ctx context.Context, q ListQuery) (HolderPage, error)
}

// ListQuery asks a HolderLister for one page of held leases.
type ListQuery struct {
	// Prefix restricts the listing to the names that start with it; ""
	// lists every name. It is a valid name prefix (ValidatePrefix).
	Prefix string
	// Cursor is "" for the first page, else the Next of the page before,
	// listed with the same Prefix.
	Cursor string
	// Limit is the largest number of leases the page may hold, 1 to
	// MaxListLimit.
	Limit int
}

// HolderPage is one page of a listing of held leases.
type HolderPage struct {
	// Leases are the held leases of the page, in name order.
	Leases []HeldLease
	// Next is the cursor of the next page; "" when the listing is
	// complete.
	Next string
}

// HeldLease is one lease of a listing: its name and who holds it.
type HeldLease struct {
	Name   string `json:"name"`
	Holder Holder `json:"holder"`
}

// HolderReader is implemented by backends that can tell who holds a lease
// now (every backend of this repository). The engine discovers it with a
// type assertion; Client.Holder fails with ErrNotSupported without it.
type HolderReader interface {
	// Holder returns the holder of the lease name. ok is false when no live
	// session holds it: never taken, released, or its owner's session
	// ended. It returns a *NameError for an invalid name.
	Holder(ctx context.Context, name string) (h Holder, ok bool, err error)
}

// IdentityOpener is implemented by backends that store an identity with
// each session, so that a Holder names the client behind a session. The
// engine opens its sessions with it when the backend implements it.
type IdentityOpener interface {
	// OpenSessionAs is OpenSession for a session that carries identity.
	OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (SessionGrant, error)
}

// LeaseLimiter is implemented by a backend that refuses session leases
// above a bound: every OpenSession and KeepAlive of a longer lease fails,
// so a client configured with one would never open a session. New checks
// the Config's LeaseDuration against it and fails with a *ConfigError.
//
// A backend whose store shortens a lease it finds too long (a Zookeeper
// server's maxSessionTimeout) does not implement it: the engine follows the
// shorter grant (R-DL-5).
type LeaseLimiter interface {
	// MaxLeaseDuration returns the longest lease the backend accepts; zero
	// or less means no bound.
	MaxLeaseDuration() time.Duration
}

// Sweeper is implemented by backends that can remove the state they keep
// for lease names nobody uses any more, so that a lock per entity (an
// invoice, an order) does not leave a record per name for ever
// (docs/adr/0012-bounded-lease-state.md). The engine never calls it; an
// operator's job does, through Client.Sweep or the backend itself.
//
// Sweep removes the record of every name that no live session holds,
// nobody waits for, and whose last term began at least idle ago, and
// returns how many it removed. Tokens stay strictly increasing per name
// (R-TERM-2): in the step that removes records, the backend raises a floor
// to the highest token removed, and a name without a record starts its
// next term above that floor, so its tokens jump rather than count on. A
// backend may refuse an idle below its own minimum with an error matching
// ErrInvalidArgument. When ctx ends, what was removed stays removed.
type Sweeper interface {
	Sweep(ctx context.Context, idle time.Duration) (removed int, err error)
}

// PermitAcquirer is implemented by backends that hand out the permits of
// semaphores (every backend of this repository); Client.Semaphore needs it
// and fails with ErrNotSupported without it (docs/adr/0040-semaphores.md).
//
// A semaphore of name with n permits is n ordinary leases, its slots,
// named PermitName(name, 0) to PermitName(name, n-1): KeepAlive, Release,
// CloseSession, Holder and ListHolders treat them as any lease. Only the
// acquire differs. AcquirePermit(s, p) is Acquire of the slot's lease
// PermitName(p.Semaphore, p.Slot), with the same ownership rules and the
// same atomicity, and two more duties, both in the same atomic step:
//
//   - Tokens: the new term's token is greater than every token any slot
//     of p.Semaphore has had before, on this backend, whatever the number
//     of permits it was asked with (and than every token of the slot's own
//     lease, including those before a sweep). The tokens of a semaphore
//     thus strictly increase in the order its permits are granted.
//   - Permits: the backend records the number of permits of each
//     semaphore. While a live session owns a slot of the recorded number
//     (PermitName(p.Semaphore, i) for i below it), a call with another
//     p.Permits fails with an error matching ErrPermitsMismatch and
//     changes nothing; otherwise the call records p.Permits. Of two calls
//     with different numbers racing on an unheld semaphore, at most one
//     wins a slot.
//
// A Permit with Permits outside [1, MaxPermits], a Slot outside [0,
// Permits), or an invalid name (for the semaphore or its last slot) fails
// with an error matching ErrInvalidArgument or a *NameError.
type PermitAcquirer interface {
	AcquirePermit(ctx context.Context, s SessionID, p Permit) (AcquireResult, error)
}

// Permit names one slot of a semaphore, for [PermitAcquirer].
type Permit struct {
	Semaphore string // the semaphore's name
	Permits   int    // how many permits the caller believes it has
	Slot      int    // the slot asked for, 0 to Permits-1
}

// OpenedBackend is a [Backend] that owns what it opened (connections,
// goroutines): Close releases it. Close of the backends of this project
// returns within a few seconds whatever the server does; sessions left
// open expire on the server, or are ended by Close when the server ties
// them to the connection (Zookeeper).
type OpenedBackend interface {
	Backend
	Close() error
}
