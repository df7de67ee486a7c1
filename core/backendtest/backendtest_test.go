package backendtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
	"github.com/simba-go/simba/core/fencing"
	"github.com/simba-go/simba/core/fencingtest"
	"github.com/simba-go/simba/core/memory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mutantEnv, when set, makes TestMutants run the suite against the broken
// backends below instead of being skipped.
const mutantEnv = "BACKENDTEST_MUTANTS"

// mutants maps each deliberate defect to the checks that must catch it.
var mutants = map[string][]string{
	"none":                      nil,
	"token-constant":            {"TokensIncreaseAcrossTerms"},
	"not-exclusive":             {"LeaseHeldByOtherSessionNotWon", "ConcurrentAcquireOneWinner", "EngineLocks"},
	"release-ignores-token":     {"ReleaseWithStaleTokenIsNoop"},
	"release-by-anyone":         {"ReleaseByOtherSessionIsNoop"},
	"lists-lost-leases":         {"KeepAliveDropsLeaseTakenOver"},
	"revives":                   {"CloseFreesLeasesAtOnce", "ExpiryAndNoRevival"},
	"expires-early":             {"ExpiryAndNoRevival"},
	"never-expires":             {"ExpiryAndNoRevival"},
	"overstates-remaining":      {"OpenSessionGrantsFreshIDs"},
	"case-insensitive":          {"ValidNamesAtTheLimits"},
	"leave-ignored":             {"GroupMembership"},
	"watch-never-fires":         {"ReleaseNotifier"},
	"release-check-then-delete": {"ReleaseBesideReacquireIsAtomic"},
	"sweep-forgets-tokens":      {"SweepKeepsTokensIncreasing"},
	"sweep-removes-held":        {"SweepKeepsTokensIncreasing", "SweepKeepsTermWonWhileItWaited"},
	"sweep-judges-before-wait":  {"SweepKeepsTermWonWhileItWaited"},
	"list-shows-free":           {"HolderLister"},
	"list-shows-ended":          {"HolderLister"},
	"list-misses-last":          {"HolderLister"},
	"list-ignores-prefix":       {"HolderLister"},
	"list-breaks-limit":         {"HolderLister"},
	"list-repeats-last":         {"HolderLister"},
	"close-ignored":             {"ClosedBackend"},
	"close-leaks-goroutine":     {"ClosedBackend"},
	"silence-outlasts-context":  {"SilentServer", "ServerGoesSilent"},
	"silence-expires-session":   {"SilentServer", "ServerGoesSilent"},
	"secret-in-error":           {"SecretsInErrors"},
	"secret-in-log":             {"SecretsInErrors"},
	"fence-accepts-lower":       {"FencingKit", "StaleWriterRejected"},
	"sweep-removes-nothing":     {"SweepKeepsTokensIncreasing"},
	"unknown-release-fails":     {"UnknownSessionsAreExpired"},
	"names-unchecked":           {"InvalidNamesRefused"},
	"ignores-cancel":            {"CancelledContext"},
	"holder-outlives-expiry":    {"HolderReader"},
	"keepalive-cost-grows":      {"KeepAliveCost"},
	"permits-unchecked":         {"PermitsAtMostN", "PermitsMismatch", "PermitsRace"},
	"release-lost-when-busy":    {"ConcurrentCallsOfOneSession"},
	"owned-by-anyone":           {"OpenSessionGrantsFreshIDs", "LeaseHeldByOtherSessionNotWon"},
}

// TestSuiteCatchesBrokenBackends runs the suite against backends with one
// defect each, in a child process since the suite fails its *testing.T,
// and checks that every defect makes the expected checks fail while the
// healthy backend passes everything.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in a child process")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMutants$", "-test.v")
	cmd.Env = append(os.Environ(), mutantEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed every broken backend:\n%s", out)
	}
	results := make(map[string]string) // "kind/Check" -> PASS, FAIL or SKIP
	for _, m := range regexp.MustCompile(`--- (PASS|FAIL|SKIP): TestMutants/(\S+)`).FindAllStringSubmatch(string(out), -1) {
		results[m[2]] = m[1]
	}
	for kind, catchers := range mutants {
		if kind == "none" {
			if got := results[kind]; got != "PASS" {
				t.Errorf("the healthy backend: %q, want PASS", got)
			}
			continue
		}
		for _, check := range catchers {
			if got := results[kind+"/"+check]; got != "FAIL" {
				t.Errorf("defect %s: check %s %q, want FAIL", kind, check, got)
			}
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

// TestMutants is the child half of TestSuiteCatchesBrokenBackends.
func TestMutants(t *testing.T) {
	if os.Getenv(mutantEnv) == "" {
		t.Skip("run by TestSuiteCatchesBrokenBackends")
	}
	for kind := range mutants {
		t.Run(kind, func(t *testing.T) {
			srv, g := memory.New(), &gate{held: map[string]chan struct{}{}, names: map[string]bool{}, terms: map[string]simba.Holder{}, ended: map[string]bool{}}
			connect := func(t testing.TB) *mutant {
				m := &mutant{Conn: srv.Connect(), srv: srv, kind: kind, gate: g, won: make(map[simba.SessionID]map[string]uint64)}
				m.leak = make(chan struct{})
				t.Cleanup(func() { close(m.leak) })
				return m
			}
			h := hooks(srv, kind)
			h.New = func(t testing.TB) simba.Backend { return connect(t) }
			h.Synctest, h.Hold, h.Waiting = true, g.hold, g.waiters
			h.Silent = func(_ context.Context, t testing.TB) (simba.Backend, error) {
				m := connect(t)
				m.Stall()
				return m, nil
			}
			h.Silenced = func(t testing.TB) (simba.Backend, func()) {
				m := connect(t)
				return m, m.Stall
			}
			h.KeepAliveCost = func(t testing.TB) (simba.Backend, func(testing.TB) int64) {
				m := connect(t)
				return m, func(testing.TB) int64 { return m.work.Load() }
			}
			backendtest.Run(t, h)
		})
	}
}

// busyLeases is how many names a session of release-lost-when-busy wins
// before its releases are lost.
const busyLeases = 20

// mutant is a memory connection with one defect, named by kind.
type mutant struct {
	*memory.Conn
	srv  *memory.Server
	kind string

	gate *gate

	mu    sync.Mutex
	won   map[simba.SessionID]map[string]uint64 // for lists-lost-leases, keepalive-cost-grows and release-lost-when-busy
	swept bool                                  // for sweep-forgets-tokens: a sweep ran
	leak  chan struct{}                         // closed when the test ends, for close-leaks-goroutine
	work  atomic.Int64                          // the store's work for this connection: one a call, for KeepAliveCost
}

// hooks returns the harness of the memory store srv with every hook that
// needs more than the SPI set, broken as kind says for the fences and the
// secrets.
func hooks(srv *memory.Server, kind string) backendtest.Harness {
	return backendtest.Harness{
		ErrClosed: memory.ErrClosed,
		Expire:    func(_ testing.TB, id simba.SessionID) { srv.ExpireSession(id) },
		Stored:    func(_ testing.TB, name string) bool { return srv.LastToken(name) != 0 },
		Fences: []backendtest.Fence{{Name: "value", New: func(testing.TB) fencingtest.Resource {
			return &fenced{lower: kind == "fence-accepts-lower"}
		}}},
		Secrets: func(testing.TB) []backendtest.SecretCase {
			return []backendtest.SecretCase{{Name: "wrong password", Open: func(_ context.Context, pw string, log *slog.Logger) (io.Closer, error) {
				shown := "xxxxx"
				if kind == "secret-in-error" || kind == "secret-in-log" {
					shown = url.UserPassword("simba", pw).String()
				}
				msg := "memory://" + shown + "@store: the password was refused"
				if kind == "secret-in-log" {
					log.Info(msg)
					return nil, errAuth
				}
				return nil, fmt.Errorf("%s: %w", msg, errAuth)
			}, Want: func(err error) bool { return errors.Is(err, errAuth) }}}
		},
	}
}

var errAuth = errors.New("authentication failed")

// fenced is a fenced value of core/fencing; lower makes it accept lower
// tokens too.
type fenced struct {
	mu    sync.Mutex // held by every call: lower replaces v
	v     fencing.Value[string]
	lower bool
}

func (f *fenced) Write(_ context.Context, token uint64, value string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lower {
		_, cur := f.v.Load()
		if token < cur {
			f.v = fencing.Value[string]{}
		}
	}
	return f.v.Write(token, value), nil
}

func (f *fenced) State(context.Context) (uint64, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, tok := f.v.Load()
	return tok, v, nil
}

// Close is the memory connection's, except for close-ignored, which
// leaves it open, and close-leaks-goroutine, which leaves a goroutine
// behind until the test ends.
func (m *mutant) Close() error {
	switch m.kind {
	case "close-ignored":
		return nil
	case "close-leaks-goroutine":
		go func() { <-m.leak }()
	}
	return m.Conn.Close()
}

// silenced applies silence-outlasts-context and silence-expires-session
// to a call that failed on a stalled connection.
func (m *mutant) silenced(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch m.kind {
	case "silence-outlasts-context":
		time.Sleep(3 * time.Second)
	case "silence-expires-session":
		return fmt.Errorf("%w (%w)", simba.ErrSessionExpired, ctx.Err())
	}
	return err
}

// Sweep is the memory store's, except for sweep-forgets-tokens, whose
// terms all get token 1 after a sweep (a counter that restarted), and sweep-removes-held, which
// also frees every lease held (as if it ignored owners).
func (m *mutant) Sweep(ctx context.Context, idle time.Duration) (int, error) {
	var free []string // for sweep-judges-before-wait
	if m.kind == "sweep-judges-before-wait" {
		m.gate.mu.Lock()
		for name := range m.gate.names {
			if _, _, ok := m.srv.Owner(name); !ok {
				free = append(free, name)
			}
		}
		m.gate.mu.Unlock()
	}
	if err := m.gate.pass(ctx, ""); err != nil {
		return 0, err
	}
	if m.kind == "sweep-judges-before-wait" {
		// The acquires that waited ahead of it run first (in the bubble,
		// the sleep ends once they are done).
		time.Sleep(time.Millisecond)
	}
	if m.kind == "sweep-removes-nothing" {
		return 2, nil
	}
	n, err := m.Conn.Sweep(ctx, idle)
	switch {
	case err != nil:
	case m.kind == "sweep-judges-before-wait":
		// It frees what was free when it began, won meanwhile or not.
		for _, name := range free {
			if owner, _, ok := m.srv.Owner(name); ok {
				m.srv.ExpireSession(owner)
			}
		}
	case m.kind == "sweep-forgets-tokens":
		m.mu.Lock()
		m.swept = true
		m.mu.Unlock()
	case m.kind == "sweep-removes-held":
		for _, id := range m.srv.Sessions() {
			m.srv.ExpireSession(id)
		}
	}
	return n, err
}

func (m *mutant) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	g, err := m.openSession(ctx, lease)
	return g, m.silenced(ctx, err)
}

func (m *mutant) openSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	switch m.kind {
	case "expires-early":
		g, err := m.Conn.OpenSession(ctx, lease/2)
		g.Remaining = lease
		return g, err
	case "never-expires":
		g, err := m.Conn.OpenSession(ctx, 1000*lease)
		g.Remaining = lease
		return g, err
	case "overstates-remaining":
		g, err := m.Conn.OpenSession(ctx, lease)
		g.Remaining = 2 * lease
		return g, err
	}
	return m.Conn.OpenSession(ctx, lease)
}

func (m *mutant) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	lease := req.Lease
	switch m.kind {
	case "expires-early":
		req.Lease = lease / 2
	case "never-expires":
		req.Lease = 1000 * lease
	}
	r, err := m.Conn.KeepAlive(ctx, s, req)
	err = m.silenced(ctx, err)
	m.work.Add(1)
	if m.kind == "keepalive-cost-grows" { // as a store that reads every lease won
		m.mu.Lock()
		m.work.Add(int64(len(m.won[s])))
		m.mu.Unlock()
	}
	r.Remaining = lease
	switch {
	case m.kind == "revives" && errors.Is(err, simba.ErrSessionExpired):
		return simba.KeepAliveReply{Remaining: lease}, nil
	case m.kind == "owned-by-anyone" && err == nil:
		// It reports the holder's token of every unsure name, whoever
		// holds it.
		for _, name := range req.Unsure {
			if _, tok, ok := m.srv.Owner(name); ok {
				if r.Owned == nil {
					r.Owned = map[string]uint64{}
				}
				r.Owned[name] = tok
			}
		}
	case m.kind == "lists-lost-leases" && err == nil:
		// It answers from what its replies won, as a backend that keeps a
		// record of its own would, blind to a lease lost since.
		m.mu.Lock()
		r.Lost = nil
		for name, tok := range m.won[s] {
			if slices.Contains(req.Unsure, name) {
				if r.Owned == nil {
					r.Owned = map[string]uint64{}
				}
				r.Owned[name] = tok
			}
		}
		m.mu.Unlock()
	}
	return r, err
}

// AcquirePermit of permits-unchecked acquires the slot as a plain lease:
// tokens per slot, no record of the number of permits.
func (m *mutant) AcquirePermit(ctx context.Context, s simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	if m.kind == "permits-unchecked" {
		if err := simba.ValidatePermit(p); err != nil {
			return simba.AcquireResult{}, err
		}
		return m.Conn.Acquire(ctx, s, simba.PermitName(p.Semaphore, p.Slot))
	}
	return m.Conn.AcquirePermit(ctx, s, p)
}

func (m *mutant) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	if m.kind == "case-insensitive" {
		name = strings.ToLower(name)
	}
	if err := m.gate.pass(ctx, name); err != nil {
		return simba.AcquireResult{}, err
	}
	switch {
	case m.kind == "names-unchecked" && simba.ValidateName(name) != nil:
		return simba.AcquireResult{}, nil
	case m.kind == "ignores-cancel" && errors.Is(ctx.Err(), context.Canceled):
		ctx = context.WithoutCancel(ctx)
	}
	r, err := m.Conn.Acquire(ctx, s, name)
	err = m.silenced(ctx, err)
	switch {
	case err != nil:
	case m.kind == "token-constant" && r.Won:
		r.Token = 1
	case m.kind == "not-exclusive" && !r.Won:
		r = simba.AcquireResult{Won: true, Token: m.srv.LastToken(name)}
	case m.kind == "sweep-forgets-tokens" && r.Won:
		m.mu.Lock()
		if m.swept {
			r.Token = 1
		}
		m.mu.Unlock()
	case (m.kind == "list-shows-ended" || m.kind == "holder-outlives-expiry") && r.Won:
		m.gate.mu.Lock()
		m.gate.terms[name] = simba.Holder{Session: s, Token: r.Token}
		m.gate.mu.Unlock()
	case (m.kind == "lists-lost-leases" || m.kind == "keepalive-cost-grows" || m.kind == "release-lost-when-busy") && r.Won:
		m.mu.Lock()
		if m.won[s] == nil {
			m.won[s] = make(map[string]uint64)
		}
		m.won[s][name] = r.Token
		m.mu.Unlock()
	}
	return r, err
}

func (m *mutant) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	if m.kind == "case-insensitive" {
		name = strings.ToLower(name)
	}
	m.gate.mu.Lock()
	m.gate.ended[fmt.Sprint(name, "#", token)] = true
	m.gate.mu.Unlock()
	owner, current, ok := m.srv.Owner(name)
	if m.kind == "unknown-release-fails" && !slices.Contains(m.srv.Sessions(), s) {
		return errors.New("release: no such session")
	}
	if m.kind == "release-lost-when-busy" {
		// A session that won many names loses its releases, as a store
		// that drops requests under load while answering them.
		m.mu.Lock()
		busy := len(m.won[s]) >= busyLeases
		m.mu.Unlock()
		if busy {
			return nil
		}
	}
	switch {
	case m.kind == "release-ignores-token" && ok && owner == s:
		token = current
	case m.kind == "release-by-anyone" && ok:
		s, token = owner, current
	case m.kind == "release-check-then-delete":
		// Two steps, as an exists then a delete guarded by a version that
		// every term of the name shares: the check passes, other calls run,
		// and the delete ends whatever term s owns by then.
		if !ok || owner != s || current != token {
			return nil
		}
		time.Sleep(time.Millisecond)
		if owner, current, ok := m.srv.Owner(name); ok && owner == s {
			token = current
		}
	}
	return m.Conn.Release(ctx, s, name, token)
}

// ListHolders is the memory store's listing, except for the list-*
// kinds: list-shows-free also lists the names nobody holds, and
// list-shows-ended those whose owner's session ended (closed or expired);
// list-misses-last leaves out the last lease of a page that has a next
// one, list-ignores-prefix lists every name, list-breaks-limit one lease
// more than the limit, and list-repeats-last hands back a cursor one
// name short, so that the next page starts with the last name again.
func (m *mutant) ListHolders(ctx context.Context, q simba.ListQuery) (simba.HolderPage, error) {
	switch {
	case m.kind == "list-ignores-prefix":
		q.Prefix = ""
	case m.kind == "list-breaks-limit" && q.Limit >= 1:
		q.Limit++
	}
	p, err := m.Conn.ListHolders(ctx, q)
	if err != nil {
		return p, err
	}
	n := len(p.Leases)
	switch m.kind {
	case "list-misses-last":
		if p.Next != "" && n > 0 {
			p.Leases = p.Leases[:n-1]
		}
	case "list-repeats-last":
		if p.Next != "" && n > 1 {
			p.Next = p.Leases[n-2].Name
		}
	case "list-shows-free", "list-shows-ended":
		live := map[simba.SessionID]bool{}
		for _, id := range m.srv.Sessions() {
			live[id] = true
		}
		m.gate.mu.Lock()
		for name := range m.gate.names {
			if !strings.HasPrefix(name, q.Prefix) || name <= q.Cursor || (p.Next != "" && name > p.Next) {
				continue
			}
			if _, _, held := m.srv.Owner(name); held {
				continue
			}
			h, won := m.gate.terms[name]
			switch {
			case m.kind == "list-shows-free":
				p.Leases = append(p.Leases, simba.HeldLease{Name: name, Holder: simba.Holder{Token: m.srv.LastToken(name)}})
			case won && !live[h.Session] && h.Token == m.srv.LastToken(name):
				p.Leases = append(p.Leases, simba.HeldLease{Name: name, Holder: h})
			}
		}
		m.gate.mu.Unlock()
		slices.SortFunc(p.Leases, func(a, b simba.HeldLease) int { return strings.Compare(a.Name, b.Name) })
		if len(p.Leases) > q.Limit {
			p.Leases, p.Next = p.Leases[:q.Limit], p.Leases[q.Limit-1].Name
		}
	}
	return p, nil
}

// Holder is the memory store's, except for holder-outlives-expiry, which
// names the last owner of a free name whose term was neither released nor
// closed: its session expired (as a reader that trusts the row's owner).
func (m *mutant) Holder(ctx context.Context, name string) (simba.Holder, bool, error) {
	h, ok, err := m.Conn.Holder(ctx, name)
	if err != nil || ok || m.kind != "holder-outlives-expiry" {
		return h, ok, err
	}
	m.gate.mu.Lock()
	defer m.gate.mu.Unlock()
	if last, won := m.gate.terms[name]; won && last.Token == m.srv.LastToken(name) && !slices.Contains(m.srv.Sessions(), last.Session) {
		if !m.gate.ended[string(last.Session)] && !m.gate.ended[fmt.Sprint(name, "#", last.Token)] {
			return last, true, nil
		}
	}
	return h, ok, err
}

func (m *mutant) CloseSession(ctx context.Context, s simba.SessionID) error {
	m.gate.mu.Lock()
	m.gate.ended[string(s)] = true
	m.gate.mu.Unlock()
	return m.Conn.CloseSession(ctx, s)
}

func (m *mutant) LeaveGroup(ctx context.Context, s simba.SessionID, group string) error {
	if m.kind == "leave-ignored" {
		return nil
	}
	return m.Conn.LeaveGroup(ctx, s, group)
}

func (m *mutant) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	if m.kind == "watch-never-fires" {
		return make(chan struct{}), nil
	}
	return m.Conn.WatchRelease(ctx, name)
}

// gate is the Harness.Hold of the memory backend: an acquire of a held
// name, or of any name while "" (the floor) is held, and a sweep while
// anything is held wait until it is let go.
type gate struct {
	mu      sync.Mutex
	held    map[string]chan struct{}
	waiting int
	names   map[string]bool         // acquired ever, for sweep-judges-before-wait and the list-* kinds
	terms   map[string]simba.Holder // the last term won of each name, for list-shows-ended
	ended   map[string]bool         // sessions closed and "name#token" released, for holder-outlives-expiry
}

func (g *gate) hold(t testing.TB, name string) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := make(chan struct{})
	g.held[name] = ch
	var once sync.Once
	release := func() {
		once.Do(func() {
			g.mu.Lock()
			delete(g.held, name)
			g.mu.Unlock()
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}

func (g *gate) waiters(testing.TB) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// pass waits while name is held (a sweep, name "": while anything is).
func (g *gate) pass(ctx context.Context, name string) error {
	for {
		g.mu.Lock()
		if name != "" {
			g.names[name] = true
		}
		var ch chan struct{}
		for held, c := range g.held {
			if name == "" || held == name || held == "" {
				ch = c
				break
			}
		}
		if ch == nil {
			g.mu.Unlock()
			return nil
		}
		g.waiting++
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// TestSlowConnects runs the suite against a healthy backend whose nodes
// each take a quarter of the lease to connect, as a TLS handshake can on a
// loaded machine: a check must not let a session expire while it opens
// the next nodes, unless expiry is what it checks.
func TestSlowConnects(t *testing.T) {
	srv := memory.New()
	backendtest.Run(t, backendtest.Harness{
		New: func(testing.TB) simba.Backend {
			time.Sleep(backendtest.DefaultLease / 4)
			return srv.Connect()
		},
		Synctest: true,
	})
}
