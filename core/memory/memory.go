// Package memory is an in-process backend for Simba: a store held in a Go
// value that expires sessions, keeps per-name fencing tokens and group
// memberships exactly like a real server, plus fault controls to test what
// a client does when its server misbehaves.
//
// A [Server] is the store. It implements [simba.Backend] and
// [simba.ReleaseNotifier] itself, as a connection that never fails. Each
// node of a test gets its own [Conn] from [Server.Connect]; faults (a stalled
// network, failing calls, lost replies, latency) are set per connection and
// never change the store.
//
// Expiry is read from time.Now on every call, with no goroutine of its own:
// a session whose expiry time has been reached is ended by the next call
// that looks at the store, whatever its kind, and stays ended. Inside a
// testing/synctest bubble the store therefore shares the bubble's fake clock
// with the code under test, and every expiry happens at the exact instant.
// A Server may be used by many goroutines at once.
//
// [Open] (or simba.OpenBackend, which this package registers for the
// scheme memory) connects to a store named by a URL, memory://NAME: every
// connection to one name within this process shares one store, which
// lives as long as the process. It is for tests, demos and a first try,
// never for nodes in different processes.
//
// Tokens per name start at 1 and grow by one per term; only
// [Server.Sweep] deletes lease records, and it raises a floor that the
// next term of a swept name starts above, so a token is never reused.
// Session identifiers are 128 random bits in hex.
package memory

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// Operation names, the keys of [Server.Calls] and [Conn.Calls].
const (
	OpOpenSession   = "OpenSession"
	OpKeepAlive     = "KeepAlive"
	OpAcquire       = "Acquire"
	OpAcquirePermit = "AcquirePermit"
	OpRelease       = "Release"
	OpJoinGroup     = "JoinGroup"
	OpLeaveGroup    = "LeaveGroup"
	OpCloseSession  = "CloseSession"
	OpWatchRelease  = "WatchRelease"
	OpHolder        = "Holder"
	OpSweep         = "Sweep"
	OpListHolders   = "ListHolders"
)

var (
	_ simba.Backend         = (*Server)(nil)
	_ simba.ReleaseNotifier = (*Server)(nil)
	_ simba.HolderReader    = (*Server)(nil)
	_ simba.IdentityOpener  = (*Server)(nil)
	_ simba.Sweeper         = (*Server)(nil)
	_ simba.HolderLister    = (*Server)(nil)
	_ simba.PermitAcquirer  = (*Server)(nil)
)

// Server is the in-memory store. The zero value is an empty store, like
// the one [New] returns.
type Server struct {
	mu       sync.Mutex
	maxLease time.Duration
	sessions map[simba.SessionID]*session
	expiry   expiryHeap
	leases   map[string]*record // deleted only by Sweep, which raises floor
	floor    uint64             // the highest token Sweep removed: new records start above it
	groups   map[string]map[*session]struct{}
	permits  map[string]*semaphore // never deleted: a semaphore's tokens only grow
	watchers map[string]map[*watcher]struct{}
	phantom  *session // owner of the leases taken by TakeOver, never expires
	calls    map[string]int
	warnings []simba.Warning
}

type session struct {
	id       simba.SessionID
	identity string    // as given to OpenSessionAs
	expires  time.Time // unused when forever is set
	forever  bool      // the phantom session of TakeOver
	index    int       // position in Server.expiry, -1 when not in it
	leases   map[string]struct{}
	groups   map[string]struct{}
}

type record struct {
	owner *session  // nil when free
	token uint64    // token of the last term, 0 before the first one
	since time.Time // when the last term began
}

type watcher struct {
	ch   chan struct{}
	conn *Conn       // nil when watched through the Server itself
	stop func() bool // unregisters the context.AfterFunc that drops the watch
}

// New returns an empty store with no lease cap.
func New() *Server {
	return new(Server)
}

// lock locks the store, making its maps on first use.
func (s *Server) lock() {
	s.mu.Lock()
	if s.sessions == nil {
		s.sessions = make(map[simba.SessionID]*session)
		s.leases = make(map[string]*record)
		s.groups = make(map[string]map[*session]struct{})
		s.permits = make(map[string]*semaphore)
		s.watchers = make(map[string]map[*watcher]struct{})
		s.calls = make(map[string]int)
	}
}

// Connect returns a new connection to s, with no fault set: one node's
// view of the store.
func (s *Server) Connect() *Conn {
	return &Conn{s: s, done: make(chan struct{}), calls: make(map[string]int)}
}

// begin checks ctx, locks the store, ends every session that has expired by
// now and counts op, for the store and for c when not nil. The caller must
// unlock s.mu.
func (s *Server) begin(ctx context.Context, op string, c *Conn) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("memory: %s: %w", op, err)
	}
	s.lock()
	now := time.Now()
	s.expire(now)
	s.calls[op]++
	if c != nil {
		c.count(op)
	}
	return now, nil
}

// live returns the live session id, or an error wrapping
// simba.ErrSessionExpired. Expired and closed sessions are deleted, so an
// unknown id and a dead one get the same answer.
func (s *Server) live(op string, id simba.SessionID) (*session, error) {
	if ss, ok := s.sessions[id]; ok {
		return ss, nil
	}
	return nil, fmt.Errorf("memory: %s: session %s: %w", op, id, simba.ErrSessionExpired)
}

// grant is how long a session asking for d is kept: d, capped by the
// server's maximum lease when one is set.
func (s *Server) grant(op string, d time.Duration) (time.Duration, error) {
	if d <= 0 {
		return 0, fmt.Errorf("memory: %s: lease %v is not positive", op, d)
	}
	if s.maxLease > 0 && d > s.maxLease {
		d = s.maxLease
	}
	return d, nil
}

// OpenSession creates a session with a fresh random id that expires lease
// (capped by [Server.SetMaxLease]) from now unless kept alive. A
// non-positive lease is refused.
func (s *Server) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	return s.openSession(ctx, lease, "", nil)
}

// OpenSessionAs is OpenSession for a session that carries identity, which
// [Server.Holder] reports.
func (s *Server) OpenSessionAs(ctx context.Context, lease time.Duration, identity string) (simba.SessionGrant, error) {
	return s.openSession(ctx, lease, identity, nil)
}

func (s *Server) openSession(ctx context.Context, lease time.Duration, identity string, c *Conn) (simba.SessionGrant, error) {
	now, err := s.begin(ctx, OpOpenSession, c)
	if err != nil {
		return simba.SessionGrant{}, err
	}
	defer s.mu.Unlock()
	d, err := s.grant(OpOpenSession, lease)
	if err != nil {
		return simba.SessionGrant{}, err
	}
	ss := s.newSession()
	ss.identity = identity
	ss.expires = now.Add(d)
	heap.Push(&s.expiry, ss)
	return simba.SessionGrant{ID: ss.id, Remaining: d, Warnings: slices.Clone(s.warnings)}, nil
}

// newSession registers a session with an id never seen before.
func (s *Server) newSession() *session {
	for {
		id := newID()
		if _, taken := s.sessions[id]; taken {
			continue // 128 random bits: never in practice
		}
		ss := &session{id: id, index: -1, leases: make(map[string]struct{}), groups: make(map[string]struct{})}
		s.sessions[id] = ss
		return ss
	}
}

func newID() simba.SessionID {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return simba.SessionID(hex.EncodeToString(b[:]))
}

// KeepAlive renews session id for req.Lease (capped by
// [Server.SetMaxLease]) from now. The reply's Remaining is exactly the
// granted lease; it checks every lease of req.Held, reports the owner's
// token of every name of req.Unsure the session owns, and counts the
// members of every group it joined. A session that has expired or was
// closed gets an error wrapping simba.ErrSessionExpired, for ever.
func (s *Server) KeepAlive(ctx context.Context, id simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	return s.keepAlive(ctx, id, req, nil)
}

func (s *Server) keepAlive(ctx context.Context, id simba.SessionID, req simba.KeepAliveRequest, c *Conn) (simba.KeepAliveReply, error) {
	now, err := s.begin(ctx, OpKeepAlive, c)
	if err != nil {
		return simba.KeepAliveReply{}, err
	}
	defer s.mu.Unlock()
	ss, err := s.live(OpKeepAlive, id)
	if err != nil {
		return simba.KeepAliveReply{}, err
	}
	d, err := s.grant(OpKeepAlive, req.Lease)
	if err != nil {
		return simba.KeepAliveReply{}, err
	}
	if !ss.forever {
		ss.expires = now.Add(d)
		heap.Fix(&s.expiry, ss.index)
	}
	reply := simba.KeepAliveReply{Remaining: d, Groups: make(map[string]int, len(ss.groups))}
	for name, tok := range req.Held {
		if _, owned := ss.leases[name]; !owned || s.leases[name].token != tok {
			reply.Lost = append(reply.Lost, name)
		}
	}
	for _, name := range req.Unsure {
		if _, owned := ss.leases[name]; owned {
			if reply.Owned == nil {
				reply.Owned = make(map[string]uint64)
			}
			reply.Owned[name] = s.leases[name].token
		}
	}
	for g := range ss.groups {
		reply.Groups[g] = len(s.groups[g])
	}
	return reply, nil
}

// Acquire starts a new term of name for session id when the lease is free
// or already owned by id, with the next token of name. It reports Won ==
// false when another live session owns it, and an error wrapping
// simba.ErrSessionExpired when id is not live. Invalid names are refused
// with the error of simba.ValidateName.
func (s *Server) Acquire(ctx context.Context, id simba.SessionID, name string) (simba.AcquireResult, error) {
	return s.acquire(ctx, id, name, nil)
}

func (s *Server) acquire(ctx context.Context, id simba.SessionID, name string, c *Conn) (simba.AcquireResult, error) {
	if err := simba.ValidateName(name); err != nil {
		return simba.AcquireResult{}, fmt.Errorf("memory: %s: %w", OpAcquire, err)
	}
	if _, err := s.begin(ctx, OpAcquire, c); err != nil {
		return simba.AcquireResult{}, err
	}
	defer s.mu.Unlock()
	ss, err := s.live(OpAcquire, id)
	if err != nil {
		return simba.AcquireResult{}, err
	}
	l := s.lease(name)
	if l.owner != nil && l.owner != ss {
		return simba.AcquireResult{}, nil
	}
	return simba.AcquireResult{Won: true, Token: s.take(l, name, ss)}, nil
}

// semaphore is the record of a semaphore: the number of permits it was
// last granted under and the highest token any of its slots got.
type semaphore struct {
	permits int
	token   uint64
}

// AcquirePermit starts a new term of the slot p.Slot of semaphore
// p.Semaphore, as Acquire does for the slot's lease, with a token above
// every token of the semaphore's slots (see simba.PermitAcquirer). It fails
// with an error matching simba.ErrPermitsMismatch while a live session
// holds a slot granted under another number of permits.
func (s *Server) AcquirePermit(ctx context.Context, id simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	return s.acquirePermit(ctx, id, p, nil)
}

func (s *Server) acquirePermit(ctx context.Context, id simba.SessionID, p simba.Permit, c *Conn) (simba.AcquireResult, error) {
	if err := simba.ValidatePermit(p); err != nil {
		return simba.AcquireResult{}, fmt.Errorf("memory: %s: %w", OpAcquirePermit, err)
	}
	if _, err := s.begin(ctx, OpAcquirePermit, c); err != nil {
		return simba.AcquireResult{}, err
	}
	defer s.mu.Unlock()
	ss, err := s.live(OpAcquirePermit, id)
	if err != nil {
		return simba.AcquireResult{}, err
	}
	sem := s.permits[p.Semaphore]
	if sem == nil {
		sem = &semaphore{permits: p.Permits}
		s.permits[p.Semaphore] = sem
	}
	if sem.permits != p.Permits {
		for i := range sem.permits {
			if l := s.leases[simba.PermitName(p.Semaphore, i)]; l != nil && l.owner != nil {
				return simba.AcquireResult{}, fmt.Errorf("memory: %s: semaphore %s holds permits granted under %d, asked with %d: %w",
					OpAcquirePermit, p.Semaphore, sem.permits, p.Permits, simba.ErrPermitsMismatch)
			}
		}
		sem.permits = p.Permits
	}
	name := simba.PermitName(p.Semaphore, p.Slot)
	l := s.lease(name)
	if l.owner != nil && l.owner != ss {
		return simba.AcquireResult{}, nil
	}
	l.token = max(l.token, sem.token)
	sem.token = s.take(l, name, ss)
	return simba.AcquireResult{Won: true, Token: sem.token}, nil
}

// lease returns the record of name, creating it on first use.
func (s *Server) lease(name string) *record {
	l, ok := s.leases[name]
	if !ok {
		l = &record{token: s.floor}
		s.leases[name] = l
	}
	return l
}

// Sweep removes the record of every name that no session owns, no watch
// waits for, and whose last term began at least idle ago, and raises the
// store's token floor to the highest token removed, so that a name used
// again gets a higher token than it ever had (see simba.Sweeper).
func (s *Server) Sweep(ctx context.Context, idle time.Duration) (int, error) {
	return s.sweep(ctx, idle, nil)
}

func (s *Server) sweep(ctx context.Context, idle time.Duration, c *Conn) (int, error) {
	if idle <= 0 {
		return 0, fmt.Errorf("memory: %s: idle %v is not positive: %w", OpSweep, idle, simba.ErrInvalidArgument)
	}
	now, err := s.begin(ctx, OpSweep, c)
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	removed := 0
	for name, l := range s.leases {
		if l.owner != nil || len(s.watchers[name]) > 0 || now.Sub(l.since) < idle {
			continue
		}
		s.floor = max(s.floor, l.token)
		delete(s.leases, name)
		removed++
	}
	return removed, nil
}

// take makes ss the owner of l (named name) in a new term and returns its
// token. A previous owner silently loses it.
func (s *Server) take(l *record, name string, ss *session) uint64 {
	if l.owner != nil {
		delete(l.owner.leases, name)
	}
	l.owner = ss
	l.token++
	l.since = time.Now()
	ss.leases[name] = struct{}{}
	return l.token
}

// Holder reports the live session that owns name, its identity, its token
// and when its term began. Invalid names are refused with the error of
// simba.ValidateName.
func (s *Server) Holder(ctx context.Context, name string) (simba.Holder, bool, error) {
	return s.holder(ctx, name, nil)
}

func (s *Server) holder(ctx context.Context, name string, c *Conn) (simba.Holder, bool, error) {
	if err := simba.ValidateName(name); err != nil {
		return simba.Holder{}, false, fmt.Errorf("memory: %s: %w", OpHolder, err)
	}
	if _, err := s.begin(ctx, OpHolder, c); err != nil {
		return simba.Holder{}, false, err
	}
	defer s.mu.Unlock()
	l, ok := s.leases[name]
	if !ok || l.owner == nil {
		return simba.Holder{}, false, nil
	}
	return simba.Holder{Session: l.owner.id, Identity: l.owner.identity, Token: l.token, Since: l.since}, true, nil
}

// ListHolders returns a page of the leases a live session holds whose
// names start with q.Prefix, in name order after q.Cursor, the last name
// of the page before. The cursor of the next page is the last name of
// this one, "" when no held lease follows it. It sorts the names that
// match under the store's lock: a call costs the number of lease records
// of the prefix, and the store is for tests.
func (s *Server) ListHolders(ctx context.Context, q simba.ListQuery) (simba.HolderPage, error) {
	return s.listHolders(ctx, q, nil)
}

func (s *Server) listHolders(ctx context.Context, q simba.ListQuery, c *Conn) (simba.HolderPage, error) {
	if err := simba.ValidateListQuery(q); err != nil {
		return simba.HolderPage{}, fmt.Errorf("memory: %s: %w", OpListHolders, err)
	}
	if q.Cursor != "" && simba.ValidateName(q.Cursor) != nil {
		return simba.HolderPage{}, fmt.Errorf("memory: %s: cursor %.40q is not a lease name: %w", OpListHolders, q.Cursor, simba.ErrInvalidArgument)
	}
	if _, err := s.begin(ctx, OpListHolders, c); err != nil {
		return simba.HolderPage{}, err
	}
	defer s.mu.Unlock()
	var names []string
	for name, l := range s.leases {
		if l.owner != nil && name > q.Cursor && strings.HasPrefix(name, q.Prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	p := simba.HolderPage{Leases: make([]simba.HeldLease, 0, min(len(names), q.Limit))}
	for _, name := range names[:min(len(names), q.Limit)] {
		l := s.leases[name]
		p.Leases = append(p.Leases, simba.HeldLease{Name: name, Holder: simba.Holder{Session: l.owner.id, Identity: l.owner.identity, Token: l.token, Since: l.since}})
	}
	if len(names) > q.Limit {
		p.Next = names[q.Limit-1]
	}
	return p, nil
}

// Release frees name when session id owns it with exactly token, and does
// nothing otherwise. It fails only on an invalid name or a done ctx.
func (s *Server) Release(ctx context.Context, id simba.SessionID, name string, token uint64) error {
	return s.release(ctx, id, name, token, nil)
}

func (s *Server) release(ctx context.Context, id simba.SessionID, name string, token uint64, c *Conn) error {
	if err := simba.ValidateName(name); err != nil {
		return fmt.Errorf("memory: %s: %w", OpRelease, err)
	}
	if _, err := s.begin(ctx, OpRelease, c); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if l, ok := s.leases[name]; ok && l.owner != nil && l.owner.id == id && l.token == token {
		delete(l.owner.leases, name)
		l.owner = nil
		s.notify(name)
	}
	return nil
}

// JoinGroup makes session id a member of group and returns the number of
// live members. Group names follow the lease name rules.
func (s *Server) JoinGroup(ctx context.Context, id simba.SessionID, group string) (int, error) {
	return s.joinGroup(ctx, id, group, nil)
}

func (s *Server) joinGroup(ctx context.Context, id simba.SessionID, group string, c *Conn) (int, error) {
	if err := simba.ValidateName(group); err != nil {
		return 0, fmt.Errorf("memory: %s: %w", OpJoinGroup, err)
	}
	if _, err := s.begin(ctx, OpJoinGroup, c); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	ss, err := s.live(OpJoinGroup, id)
	if err != nil {
		return 0, err
	}
	members, ok := s.groups[group]
	if !ok {
		members = make(map[*session]struct{})
		s.groups[group] = members
	}
	members[ss] = struct{}{}
	ss.groups[group] = struct{}{}
	return len(members), nil
}

// LeaveGroup ends the membership of session id in group. Leaving a group
// the session is not in, or leaving from a dead session, does nothing.
func (s *Server) LeaveGroup(ctx context.Context, id simba.SessionID, group string) error {
	return s.leaveGroup(ctx, id, group, nil)
}

func (s *Server) leaveGroup(ctx context.Context, id simba.SessionID, group string, c *Conn) error {
	if err := simba.ValidateName(group); err != nil {
		return fmt.Errorf("memory: %s: %w", OpLeaveGroup, err)
	}
	if _, err := s.begin(ctx, OpLeaveGroup, c); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if ss, ok := s.sessions[id]; ok {
		s.leave(ss, group)
	}
	return nil
}

func (s *Server) leave(ss *session, group string) {
	delete(ss.groups, group)
	if members, ok := s.groups[group]; ok {
		delete(members, ss)
		if len(members) == 0 {
			delete(s.groups, group)
		}
	}
}

// CloseSession ends session id at once: its leases are free (watchers are
// told) and its memberships gone. Closing a dead or unknown session does
// nothing.
func (s *Server) CloseSession(ctx context.Context, id simba.SessionID) error {
	return s.closeSession(ctx, id, nil)
}

func (s *Server) closeSession(ctx context.Context, id simba.SessionID, c *Conn) error {
	if _, err := s.begin(ctx, OpCloseSession, c); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if ss, ok := s.sessions[id]; ok {
		s.end(ss)
	}
	return nil
}

// WatchRelease returns a channel that is closed when name is released, its
// owner's session is closed or is found expired by any later call, or at
// once when name has no live owner now. The watch is dropped when ctx is
// done. A take-over by another session ([Server.TakeOver]) does not close
// it: the lease is not free.
func (s *Server) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	return s.watch(ctx, name, nil)
}

func (s *Server) watch(ctx context.Context, name string, c *Conn) (<-chan struct{}, error) {
	if err := simba.ValidateName(name); err != nil {
		return nil, fmt.Errorf("memory: %s: %w", OpWatchRelease, err)
	}
	if _, err := s.begin(ctx, OpWatchRelease, c); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if c != nil && c.isClosed() {
		return nil, fmt.Errorf("memory: %s: %w", OpWatchRelease, ErrClosed)
	}
	w := &watcher{ch: make(chan struct{}), conn: c}
	if l, ok := s.leases[name]; !ok || l.owner == nil {
		close(w.ch)
		return w.ch, nil
	}
	set, ok := s.watchers[name]
	if !ok {
		set = make(map[*watcher]struct{})
		s.watchers[name] = set
	}
	set[w] = struct{}{}
	w.stop = context.AfterFunc(ctx, func() {
		s.lock()
		defer s.mu.Unlock()
		if set, ok := s.watchers[name]; ok {
			delete(set, w)
			if len(set) == 0 {
				delete(s.watchers, name)
			}
		}
	})
	return w.ch, nil
}

// notify fires and drops every watch of name. A watch made through a
// connection that is stalled, failing or dropping replies loses the
// notification, as a partitioned client would.
func (s *Server) notify(name string) {
	for w := range s.watchers[name] {
		w.stop()
		if w.conn == nil || !w.conn.cutOff() {
			close(w.ch)
		}
	}
	delete(s.watchers, name)
}

// dropWatches wakes and drops every watch made through c.
func (s *Server) dropWatches(c *Conn) {
	s.lock()
	defer s.mu.Unlock()
	for name, set := range s.watchers {
		for w := range set {
			if w.conn == c {
				w.stop()
				close(w.ch)
				delete(set, w)
			}
		}
		if len(set) == 0 {
			delete(s.watchers, name)
		}
	}
}

// expire ends every session whose expiry time is not after now.
func (s *Server) expire(now time.Time) {
	for len(s.expiry) > 0 && !now.Before(s.expiry[0].expires) {
		s.end(s.expiry[0])
	}
}

// end deletes ss: its leases become free and its memberships end.
func (s *Server) end(ss *session) {
	delete(s.sessions, ss.id)
	if ss.index >= 0 {
		heap.Remove(&s.expiry, ss.index)
	}
	if ss == s.phantom {
		s.phantom = nil
	}
	for name := range ss.leases {
		s.leases[name].owner = nil
		s.notify(name)
	}
	for g := range ss.groups {
		s.leave(ss, g)
	}
}

// ExpireSession ends session id now, as if its lease had run out, and
// reports whether it was live. Its leases become free and watchers are told.
func (s *Server) ExpireSession(id simba.SessionID) bool {
	s.lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	ss, ok := s.sessions[id]
	if ok {
		s.end(ss)
	}
	return ok
}

// SetMaxLease caps every later grant (OpenSession and KeepAlive) at d, like
// a Zookeeper maxSessionTimeout; d <= 0 removes the cap. Sessions keep the
// expiry they were last granted until their next keep-alive.
func (s *Server) SetMaxLease(d time.Duration) {
	s.lock()
	defer s.mu.Unlock()
	s.maxLease = max(d, 0)
}

// SetWarnings makes every later OpenSession report ws in its grant, as a
// real backend reports a setup that weakens a guarantee (replicas without
// the durable option, an eviction policy), so that tests can see how
// their code takes [simba.EventBackendWarning]. No ws clears them.
func (s *Server) SetWarnings(ws ...simba.Warning) {
	s.lock()
	defer s.mu.Unlock()
	s.warnings = slices.Clone(ws)
}

// TakeOver makes a phantom session, which never expires, the owner of name
// in a new term and returns its token. The previous owner loses the lease
// without being told; its next keep-alive no longer lists it. The phantom
// is not listed by [Server.Sessions]; [Server.Owner] shows its id, and
// [Server.ExpireSession] with that id ends it and frees what it took. It
// returns 0, changing nothing, for an invalid name.
func (s *Server) TakeOver(name string) uint64 {
	if simba.ValidateName(name) != nil {
		return 0
	}
	s.lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	if s.phantom == nil {
		s.phantom = s.newSession()
		s.phantom.forever = true
	}
	return s.take(s.lease(name), name, s.phantom)
}

// Owner reports the live session that owns name and its token, or ok ==
// false when name is free.
func (s *Server) Owner(name string) (id simba.SessionID, token uint64, ok bool) {
	s.lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	l, found := s.leases[name]
	if !found || l.owner == nil {
		return "", 0, false
	}
	return l.owner.id, l.token, true
}

// LastToken returns the token of the last term of name, whether it is
// still owned or not; 0 when name never had a term or Sweep removed it.
func (s *Server) LastToken(name string) uint64 {
	s.lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[name]; ok {
		return l.token
	}
	return 0
}

// Sessions returns the live sessions in id order, without the phantom
// owner of [Server.TakeOver].
func (s *Server) Sessions() []simba.SessionID {
	s.lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	ids := make([]simba.SessionID, 0, len(s.sessions))
	for id, ss := range s.sessions {
		if !ss.forever {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Members returns the number of live members of group.
func (s *Server) Members(group string) int {
	s.lock()
	defer s.mu.Unlock()
	s.expire(time.Now())
	return len(s.groups[group])
}

// Calls returns, per operation name (OpKeepAlive, ...), how many calls
// reached the store since New, through any connection or the Server
// itself. Calls stopped by a fault or a done context are not counted.
func (s *Server) Calls() map[string]int {
	s.lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// expiryHeap orders live, expiring sessions by expiry time.
type expiryHeap []*session

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	ss := x.(*session)
	ss.index = len(*h)
	*h = append(*h, ss)
}
func (h *expiryHeap) Pop() any {
	old := *h
	ss := old[len(old)-1]
	old[len(old)-1] = nil
	ss.index = -1
	*h = old[:len(old)-1]
	return ss
}
