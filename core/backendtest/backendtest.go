// Package backendtest is the conformance suite of the Simba backend SPI:
// every [simba.Backend] (memory, Redis, PostgreSQL, MySQL, Zookeeper) must
// pass [Run] before the engine can rely on it.
//
// The suite checks what the engine's guarantees are built on: fencing
// tokens that only grow, a lease that stays with its live owner, sessions
// that expire after the lease they were granted and never come back, close
// and release semantics, group member counts, every valid lease name, one
// winner when many sessions race for a name, and a release that runs at the
// same time as the same session's next acquire of the name without ending
// the term that acquire starts. For a [simba.HolderLister] it checks that
// a listing shows the held leases of a prefix, and only those, page by
// page within the limit. For a [simba.Sweeper] it checks that a
// sweep keeps tokens increasing and, where the harness can hold the
// backend's state as another client would (Harness.Hold), that a sweep
// which waited keeps a term won meanwhile. Every subtest uses lease and
// group names with a random part, so it can run against a server that
// keeps state from earlier runs, and closes the sessions it opened.
//
// The checks every backend needs beyond the SPI run behind optional hooks
// of the [Harness], each skipped with the name of the hook it lacks:
// ErrClosed (calls after Close, goroutines left), Expire (a holder and a
// term whose session ended on the store, a stale writer), Stored (what a
// sweep leaves), Fences (the fencing test kit, core/fencingtest), Silent
// and Silenced (a server that accepts connections and never answers),
// Secrets (passwords in errors and logs), KeepAliveCost (a keep-alive's
// cost flat in the leases held). Without hooks, the suite also
// checks unknown sessions, invalid names, cancelled contexts, concurrent
// calls of one session and two engine clients contending for a lock.
// The helpers of test servers (ServerEnv, TLSServer, OtherCA, Proxy,
// SilentListener) serve the backends' own tests.
package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/fencingtest"
)

// DefaultLease is the session lease the suite asks for when
// Harness.Lease is zero.
const DefaultLease = 2 * time.Second

// Harness describes the backend under test.
type Harness struct {
	// New returns a backend connected to the store under test; each call
	// is one simulated node, all share one store. It may register cleanups
	// on t (closing its connections).
	New func(t testing.TB) simba.Backend

	// Lease is the session lease the suite asks for; expiry tests wait
	// about this long in real time (memory backend: run inside synctest
	// so it is instant). Default 2s ([DefaultLease]).
	Lease time.Duration

	// Synctest, when true, runs each subtest inside a testing/synctest
	// bubble (memory backend only: a backend doing network I/O never lets
	// the bubble's clock advance).
	Synctest bool

	// Hold and Waiting, when both set, let the sweep checks force the
	// order in which a sweep and an acquire wait for each other instead
	// of leaving it to chance. Hold holds what an acquire of name and a
	// sweep both need, as another client's transaction would (on SQL: a
	// lock on the name's lease row, or with name "" on the token floor),
	// until the returned release is called; Waiting returns how many
	// calls of the suite's sessions wait for something held. The check
	// that needs them is skipped without them.
	Hold    func(t testing.TB, name string) (release func())
	Waiting func(t testing.TB) int

	// Age, when set, makes the last term of name look begun d ago (on
	// SQL: it backdates the lease row), so that the sweep checks need not
	// wait in real time for a name to become idle.
	Age func(t testing.TB, name string, d time.Duration)

	// ListUnordered, when true, says that the backend's listing of held
	// leases (simba.HolderLister) walks its store in an order of its own
	// (Redis SCAN): pages are in name order each, but not after one
	// another, and a name may show again on a later page with the same
	// holder. Without it every walk must list names in increasing order,
	// each once.
	ListUnordered bool

	// The fields below are hooks of the checks that need more than the
	// SPI; a check whose hook is nil is skipped, saying which hook it
	// lacks.

	// ErrClosed is the error every call of a backend from New must match
	// once the backend was closed (it must be an io.Closer). Check
	// ClosedBackend: Close twice, then every call fails with ErrClosed,
	// and no goroutine the backend started is left.
	ErrClosed error

	// Expire ends session id on the store now, as a lapsed lease would,
	// without a call of the SPI (on SQL: its expiry moved into the past;
	// on Redis: its key deleted). The holder and fencing checks use it.
	Expire func(t testing.TB, id simba.SessionID)

	// Stored reports whether the store keeps state of lease name (a row,
	// a key, a node). The sweep check uses it to see that a sweep removed
	// the state of idle names, those whose owner's session expired
	// included, and kept the state of held ones.
	Stored func(t testing.TB, name string) bool

	// Fences are the fenced resources of the backend (a row, a key...)
	// that the fencing test kit (core/fencingtest) is run against, one
	// subtest each. Check FencingKit, and with Expire, StaleWriterRejected.
	Fences []Fence

	// Silent returns a backend of the store under test whose server
	// accepts connections and never answers (see [SilentListener]), or
	// the error of opening it, under ctx. Check SilentServer: an open
	// that fails does so soon after ctx ends, and the calls of a backend
	// that opened do too.
	Silent func(ctx context.Context, t testing.TB) (simba.Backend, error)

	// Silenced returns a working backend of the store under test, and
	// silence, which makes its server stop answering while keeping its
	// connections open (see [Proxy]). Check ServerGoesSilent: calls
	// return soon after their context ends, without ErrSessionExpired,
	// and Close returns with calls in flight, which then end too.
	Silenced func(t testing.TB) (b simba.Backend, silence func())

	// Secrets lists ways to open the store under test that fail with a
	// password: a URL that cannot be used, a server that cannot be
	// reached, credentials the server refuses, the password written in
	// each form the backend takes. Check SecretsInErrors runs each with
	// each of [Passwords]: no part of the password may show in the error
	// chain or in the log.
	Secrets func(t testing.TB) []SecretCase

	// KeepAliveCost returns a backend of the store under test and work,
	// the server's own count of what it did for that backend so far (rows
	// read on SQL, commands on Redis, requests on Zookeeper). Check
	// KeepAliveCost: a keep-alive costs about as much with 2000 leases
	// held as with one.
	KeepAliveCost func(t testing.TB) (b simba.Backend, work func(t testing.TB) int64)
}

// Fence is a fenced resource kind of the backend under test.
type Fence struct {
	Name string
	// New returns a fresh resource, as fencingtest.Run asks for.
	New func(t testing.TB) fencingtest.Resource
}

// SecretCase is one way of opening that must fail without showing the
// password.
type SecretCase struct {
	Name string
	// Open opens with password pw, logging to log, under ctx; it must
	// fail. What it opened by mistake is closed.
	Open func(ctx context.Context, pw string, log *slog.Logger) (io.Closer, error)
	// Want, when set, must hold for the error (that it matches the
	// backend's sentinel, say).
	Want func(err error) bool
	// Within is the time Open is given; 5s when zero.
	Within time.Duration
}

// Run runs every conformance check against the backend h describes, each
// as a subtest of t. Checks that wait for an expiry take between one and
// two leases of real time unless h.Synctest is set.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("backendtest: Harness.New is nil")
	}
	if h.Lease <= 0 {
		h.Lease = DefaultLease
	}
	run := randomHex(4)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			body := func(t *testing.T) {
				c.run(&env{t: t, h: h, prefix: "bt" + run + "-" + c.short + "-"})
			}
			if h.Synctest {
				synctest.Test(t, body)
			} else {
				body(t)
			}
		})
	}
}

// checks lists the subtests in the order they run. short keeps the lease
// names of each subtest apart.
var checks = []struct {
	name, short string
	run         func(*env)
}{
	{"OpenSessionGrantsFreshIDs", "open", testOpenSession},
	{"TokensIncreaseAcrossTerms", "tok", testTokensIncrease},
	{"TokenConstantWithinTerm", "term", testTokenConstant},
	{"LeaseHeldByOtherSessionNotWon", "held", testHeldElsewhere},
	{"ReleaseWithStaleTokenIsNoop", "stale", testReleaseStaleToken},
	{"ReleaseByOtherSessionIsNoop", "other", testReleaseByOther},
	{"KeepAliveDropsLeaseTakenOver", "lost", testKeepAliveDropsLost},
	{"CloseFreesLeasesAtOnce", "close", testCloseFrees},
	{"ExpiryAndNoRevival", "exp", testExpiry},
	{"ValidNamesAtTheLimits", "name", testNames},
	{"GroupMembership", "grp", testGroups},
	{"ReleaseNotifier", "watch", testWatchRelease},
	{"ConcurrentAcquireOneWinner", "race", testConcurrentAcquire},
	{"ReleaseBesideReacquireIsAtomic", "relacq", testReleaseBesideReacquire},
	{"HolderReader", "holder", testHolder},
	{"HolderLister", "list", testListHolders},
	{"PermitsAtMostN", "sem", testPermitsAtMostN},
	{"PermitsMismatch", "semn", testPermitsMismatch},
	{"PermitsRace", "semrace", testPermitsRace},
	{"PermitsGrantOrder", "semord", testPermitsGrantOrder},
	{"SweepKeepsTokensIncreasing", "sweep", testSweep},
	{"SweepKeepsTermWonWhileItWaited", "sweeprace", testSweepRace},
	{"UnknownSessionsAreExpired", "unknown", testUnknownSessions},
	{"InvalidNamesRefused", "badname", testInvalidNames},
	{"CancelledContext", "cancel", testCancelledContext},
	{"ConcurrentCallsOfOneSession", "conc", testConcurrentCalls},
	{"EngineLocks", "engine", testEngineLocks},
	{"ClosedBackend", "closed", testClosedBackend},
	{"SilentServer", "silent", testSilentServer},
	{"ServerGoesSilent", "gosilent", testServerGoesSilent},
	{"SecretsInErrors", "secret", testSecretsInErrors},
	{"FencingKit", "fence", testFencingKit},
	{"StaleWriterRejected", "stalew", testStaleWriterRejected},
	{"KeepAliveCost", "kacost", testKeepAliveCost},
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// env is the state of one subtest.
type env struct {
	t      *testing.T
	h      Harness
	prefix string          // unique to this subtest run
	closed []simba.Backend // closed by the check: its sessions are not closed at the end
}

// closing records that the check closes b.
func (e *env) closing(b simba.Backend) { e.closed = append(e.closed, b) }

// name returns a lease or group name unique to this subtest run.
func (e *env) name(s string) string { return e.prefix + s }

// node returns a new connection to the store.
func (e *env) node() simba.Backend { return e.h.New(e.t) }

// ctx returns the context of one backend call: generous, so that only a
// hung backend hits it.
func (e *env) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.t.Context(), max(10*time.Second, 5*e.h.Lease))
}

// session is a session opened by the suite on one node.
type session struct {
	e     *env
	b     simba.Backend
	id    simba.SessionID
	lease time.Duration // asked for at open and at every keep-alive
	// held is what the engine would send as held: the terms won by win
	// and not yet released by release, with gen its generation; touched
	// holds every name the session called Acquire or Release on, which
	// each keep-alive sends as unsure, so that its reply tells what the
	// session owns of them.
	held    map[string]uint64
	gen     uint64
	touched map[string]bool
}

// open opens a session on b with Harness.Lease, checks the grant and
// closes the session when the subtest ends.
func (e *env) open(b simba.Backend) *session { return e.openFor(b, "", e.h.Lease) }

// openAs is open for a session that carries identity, through
// simba.IdentityOpener when identity is not empty.
func (e *env) openAs(b simba.Backend, identity string) *session {
	return e.openFor(b, identity, e.h.Lease)
}

// openLong is open with a lease of 30s, or Harness.Lease if longer, for
// the checks whose subject is not expiry: long enough for the nodes they
// open one after the other to connect slowly (a TLS handshake on a loaded
// machine) and for the calls they start to wait for a server that is slow
// to show the waits, without the first session expiring meanwhile.
func (e *env) openLong(b simba.Backend) *session {
	return e.openFor(b, "", max(30*time.Second, e.h.Lease))
}

func (e *env) openFor(b simba.Backend, identity string, lease time.Duration) *session {
	e.t.Helper()
	ctx, cancel := e.ctx()
	defer cancel()
	var g simba.SessionGrant
	var err error
	if o, ok := b.(simba.IdentityOpener); ok && identity != "" {
		g, err = o.OpenSessionAs(ctx, lease, identity)
	} else {
		g, err = b.OpenSession(ctx, lease)
	}
	if err != nil {
		e.t.Fatalf("OpenSession(%v): %v", lease, err)
	}
	if g.ID == "" {
		e.t.Fatalf("OpenSession(%v) granted an empty session id", lease)
	}
	checkRemaining(e.t, "OpenSession", lease, g.Remaining)
	s := &session{e: e, b: b, id: g.ID, lease: lease, held: map[string]uint64{}, touched: map[string]bool{}}
	e.t.Cleanup(func() {
		for _, c := range e.closed {
			if c == b {
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(10*time.Second, 5*e.h.Lease))
		defer cancel()
		if err := b.CloseSession(ctx, g.ID); err != nil {
			e.t.Errorf("cleanup: CloseSession(%s): %v", g.ID, err)
		}
	})
	return s
}

// checkRemaining fails unless a validity granted for lease lies in
// (0, lease].
func checkRemaining(t testing.TB, op string, lease, d time.Duration) {
	t.Helper()
	if d <= 0 || d > lease {
		t.Fatalf("%s asked for a lease of %v and was granted %v, want a value in (0, %v]", op, lease, d, lease)
	}
}

// keepAlive renews the session with what it holds and every name it
// touched as unsure, and fails unless the renewal succeeds.
func (s *session) keepAlive() simba.KeepAliveReply {
	s.e.t.Helper()
	unsure := make([]string, 0, len(s.touched))
	for name := range s.touched {
		unsure = append(unsure, name)
	}
	slices.Sort(unsure)
	return s.keepAliveWith(simba.KeepAliveRequest{Lease: s.lease, Held: maps.Clone(s.held), Generation: s.gen, Unsure: unsure})
}

func (s *session) keepAliveWith(req simba.KeepAliveRequest) simba.KeepAliveReply {
	s.e.t.Helper()
	ctx, cancel := s.e.ctx()
	defer cancel()
	r, err := s.b.KeepAlive(ctx, s.id, req)
	if err != nil {
		s.e.t.Fatalf("KeepAlive(%s) of a live session: %v", s.id, err)
	}
	checkRemaining(s.e.t, "KeepAlive", s.lease, r.Remaining)
	return r
}

func (s *session) acquire(name string) simba.AcquireResult {
	s.e.t.Helper()
	ctx, cancel := s.e.ctx()
	defer cancel()
	s.touched[name] = true
	r, err := s.b.Acquire(ctx, s.id, name)
	if err != nil {
		s.e.t.Fatalf("Acquire(%s, %q): %v", s.id, name, err)
	}
	return r
}

// win acquires name and fails unless the session won it with a token > 0.
func (s *session) win(name string) uint64 {
	s.e.t.Helper()
	r := s.acquire(name)
	if !r.Won {
		s.e.t.Fatalf("Acquire(%s, %q) = not won, want won", s.id, name)
	}
	if r.Token == 0 {
		s.e.t.Fatalf("Acquire(%s, %q) won with token 0, want a token > 0", s.id, name)
	}
	s.held[name] = r.Token
	s.gen++
	return r.Token
}

// winAbove wins name and fails unless its token is above prev, the token
// of an earlier term of name; why says what happened since.
func (s *session) winAbove(name string, prev uint64, why string) uint64 {
	s.e.t.Helper()
	tok := s.win(name)
	if tok <= prev {
		s.e.t.Fatalf("Acquire(%s, %q) won with token %d %s, want more than the earlier term's %d", s.id, name, tok, why, prev)
	}
	return tok
}

// lose acquires name and fails unless the attempt was refused with
// token 0, the lease being held by another live session.
func (s *session) lose(name, why string) {
	s.e.t.Helper()
	r := s.acquire(name)
	if r.Won {
		s.e.t.Fatalf("Acquire(%s, %q) won with token %d, want not won: %s", s.id, name, r.Token, why)
	}
	if r.Token != 0 {
		s.e.t.Fatalf("Acquire(%s, %q) lost with token %d, want token 0 when not won", s.id, name, r.Token)
	}
}

func (s *session) release(name string, token uint64) {
	s.e.t.Helper()
	ctx, cancel := s.e.ctx()
	defer cancel()
	s.touched[name] = true
	if err := s.b.Release(ctx, s.id, name, token); err != nil {
		s.e.t.Fatalf("Release(%s, %q, %d): %v", s.id, name, token, err)
	}
	if s.held[name] == token {
		delete(s.held, name)
		s.gen++
	}
}

func (s *session) join(group string) int {
	s.e.t.Helper()
	ctx, cancel := s.e.ctx()
	defer cancel()
	n, err := s.b.JoinGroup(ctx, s.id, group)
	if err != nil {
		s.e.t.Fatalf("JoinGroup(%s, %q): %v", s.id, group, err)
	}
	return n
}

// joinWant joins group and fails unless the reply counts want members.
func (s *session) joinWant(group string, want int, why string) {
	s.e.t.Helper()
	if got := s.join(group); got != want {
		s.e.t.Fatalf("JoinGroup(%s, %q) = %d members, want %d: %s", s.id, group, got, want, why)
	}
}

func (s *session) leave(group string) {
	s.e.t.Helper()
	ctx, cancel := s.e.ctx()
	defer cancel()
	if err := s.b.LeaveGroup(ctx, s.id, group); err != nil {
		s.e.t.Fatalf("LeaveGroup(%s, %q): %v", s.id, group, err)
	}
}

func (s *session) close() {
	s.e.t.Helper()
	ctx, cancel := s.e.ctx()
	defer cancel()
	if err := s.b.CloseSession(ctx, s.id); err != nil {
		s.e.t.Fatalf("CloseSession(%s): %v", s.id, err)
	}
}

// wantExpired fails unless keep-alive and acquire of the session are
// refused with simba.ErrSessionExpired; name is the lease tried.
func (s *session) wantExpired(name, why string) {
	s.e.t.Helper()
	ctx, cancel := s.e.ctx()
	defer cancel()
	if r, err := s.b.KeepAlive(ctx, s.id, simba.KeepAliveRequest{Lease: s.e.h.Lease, Held: s.held}); !errors.Is(err, simba.ErrSessionExpired) {
		s.e.t.Fatalf("KeepAlive(%s) %s = (%+v, %v), want an error wrapping simba.ErrSessionExpired", s.id, why, r, err)
	}
	if r, err := s.b.Acquire(ctx, s.id, name); !errors.Is(err, simba.ErrSessionExpired) {
		s.e.t.Fatalf("Acquire(%s, %q) %s = (%+v, %v), want an error wrapping simba.ErrSessionExpired", s.id, name, why, r, err)
	}
}

// wantLeases fails unless the reply to keepAlive says that the session
// owns exactly want (name -> token) of the names it touched: Owned has
// those entries, and Lost names every lease of held that want does not
// have at the same token (all of them when held has at most
// simba.MinLeaseChecks leases; no other name in any case).
func (s *session) wantLeases(r simba.KeepAliveReply, want map[string]uint64, why string) {
	s.e.t.Helper()
	owned := make(map[string]uint64, len(want))
	for name, tok := range r.Owned {
		if s.touched[name] {
			owned[name] = tok
		}
	}
	if !sameMap(owned, want) {
		s.e.t.Fatalf("KeepAlive(%s).Owned = %v of the names the session touched, want %v: %s", s.id, owned, want, why)
	}
	s.wantLost(r, s.held, want, why)
}

// wantLost fails unless r.Lost names the leases of held that want does
// not have at the same token: all of them when held has at most
// simba.MinLeaseChecks leases, some of them otherwise, and no other name.
func (s *session) wantLost(r simba.KeepAliveReply, held, want map[string]uint64, why string) {
	s.e.t.Helper()
	var lost []string
	for name, tok := range held {
		if want[name] != tok {
			lost = append(lost, name)
		}
	}
	slices.Sort(lost)
	got := slices.Sorted(slices.Values(r.Lost))
	got = slices.Compact(got)
	for _, name := range got {
		if !slices.Contains(lost, name) {
			s.e.t.Fatalf("KeepAlive(%s).Lost = %v, want %v: %q is held at %d and owned at %d: %s", s.id, got, lost, name, held[name], want[name], why)
		}
	}
	if len(held) <= simba.MinLeaseChecks && len(got) != len(lost) {
		s.e.t.Fatalf("KeepAlive(%s).Lost = %v with %d leases held, want %v: %s", s.id, got, len(held), lost, why)
	}
}

// wantGroups fails unless the reply lists exactly want (group -> members).
func (s *session) wantGroups(r simba.KeepAliveReply, want map[string]int, why string) {
	s.e.t.Helper()
	if !sameMap(r.Groups, want) {
		s.e.t.Fatalf("KeepAlive(%s).Groups = %v, want %v: %s", s.id, r.Groups, want, why)
	}
}

// sameMap reports whether got and want hold the same entries; a nil map
// and an empty one are the same.
func sameMap[V comparable](got, want map[string]V) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}
