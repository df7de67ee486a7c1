package sqltest

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

func testLeaseLifecycle(t *testing.T, f *fixture) {
	b := f.backend()
	const lease = 5 * time.Second
	a, c := open(t, b, lease), open(t, b, lease)
	if a == c {
		t.Fatalf("two sessions share id %s", a)
	}

	r := acquire(t, b, a, "job")
	if !r.Won || r.Token != 1 {
		t.Fatalf("first acquire = %+v, want won with token 1", r)
	}
	if r := acquire(t, b, c, "job"); r.Won || r.Token != 0 {
		t.Fatalf("acquire of a held lease = %+v, want lost with token 0", r)
	}
	r = acquire(t, b, a, "job")
	if !r.Won || r.Token != 2 {
		t.Fatalf("acquire by the owner = %+v, want a new term with token 2", r)
	}

	ka := keepAlive(t, b, a, lease, "job", "other")
	if want := map[string]uint64{"job": 2}; !maps.Equal(ka.Owned, want) {
		t.Fatalf("keep-alive leases = %v, want %v", ka.Owned, want)
	}
	if ka.Remaining <= lease-time.Second || ka.Remaining > lease {
		t.Fatalf("keep-alive remaining = %v, want just under %v", ka.Remaining, lease)
	}

	if err := b.Release(ctxT(t), a, "job", 1); err != nil {
		t.Fatalf("stale release: %v", err)
	}
	if r := acquire(t, b, c, "job"); r.Won {
		t.Fatalf("a release with a stale token freed the lease: %+v", r)
	}
	if err := b.Release(ctxT(t), c, "job", 2); err != nil {
		t.Fatalf("release by another session: %v", err)
	}
	if r := acquire(t, b, c, "job"); r.Won {
		t.Fatalf("a release by another session freed the lease: %+v", r)
	}
	if err := b.Release(ctxT(t), a, "job", 2); err != nil {
		t.Fatalf("release: %v", err)
	}
	if ka := keepAlive(t, b, a, lease, "job"); len(ka.Owned) != 0 {
		t.Fatalf("leases after release = %v, want none", ka.Owned)
	}
	r = acquire(t, b, c, "job")
	if !r.Won || r.Token != 3 {
		t.Fatalf("acquire after release = %+v, want token 3 (the row keeps its counter)", r)
	}

	if err := b.CloseSession(ctxT(t), c); err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	if r := acquire(t, b, a, "job"); !r.Won || r.Token != 4 {
		t.Fatalf("acquire after the owner closed = %+v, want token 4", r)
	}
	if _, err := b.KeepAlive(ctxT(t), c, unsure(lease)); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("keep-alive of a closed session: %v, want ErrSessionExpired", err)
	}
	if _, err := b.Acquire(ctxT(t), c, "other"); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("acquire by a closed session: %v, want ErrSessionExpired", err)
	}
	if err := b.CloseSession(ctxT(t), c); err != nil {
		t.Fatalf("closing a closed session: %v, want nil", err)
	}
}

func testExpiredSessionIsNeverRevived(t *testing.T, f *fixture) {
	b := f.backend()
	const short = 300 * time.Millisecond
	x := open(t, b, short)
	y := open(t, b, 10*time.Second)
	tok := acquire(t, b, x, "n").Token
	if _, err := b.JoinGroup(ctxT(t), x, "g"); err != nil {
		t.Fatal(err)
	}
	if r := acquire(t, b, y, "n"); r.Won {
		t.Fatalf("lease taken over before expiry: %+v", r)
	}
	time.Sleep(short + 100*time.Millisecond)

	if _, err := b.KeepAlive(ctxT(t), x, unsure(10*time.Second)); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("keep-alive after expiry: %v, want ErrSessionExpired", err)
	}
	if _, err := b.JoinGroup(ctxT(t), x, "g"); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("join after expiry: %v, want ErrSessionExpired", err)
	}
	r := acquire(t, b, y, "n")
	if !r.Won || r.Token != tok+1 {
		t.Fatalf("take-over after expiry = %+v, want token %d", r, tok+1)
	}
	n, err := b.JoinGroup(ctxT(t), y, "g")
	if err != nil || n != 1 {
		t.Fatalf("join = %d, %v; want 1 (the expired member is not counted)", n, err)
	}
	// Still dead later: the failed keep-alive did not renew it.
	if _, err := b.Acquire(ctxT(t), x, "n2"); !errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("acquire by an expired session: %v, want ErrSessionExpired", err)
	}
}

func testGroupCounts(t *testing.T, f *fixture) {
	b := f.backend()
	const lease = 5 * time.Second
	a, c := open(t, b, lease), open(t, b, lease)
	join := func(s simba.SessionID, g string, want int) {
		t.Helper()
		n, err := b.JoinGroup(ctxT(t), s, g)
		if err != nil || n != want {
			t.Fatalf("JoinGroup(%q) = %d, %v; want %d", g, n, err, want)
		}
	}
	join(a, "g", 1)
	join(c, "g", 2)
	join(a, "g", 2)
	join(c, "h", 1)
	if got, want := keepAlive(t, b, c, lease).Groups, map[string]int{"g": 2, "h": 1}; !maps.Equal(got, want) {
		t.Fatalf("groups = %v, want %v", got, want)
	}
	if err := b.LeaveGroup(ctxT(t), a, "g"); err != nil {
		t.Fatal(err)
	}
	if got, want := keepAlive(t, b, c, lease).Groups, map[string]int{"g": 1, "h": 1}; !maps.Equal(got, want) {
		t.Fatalf("groups after a leave = %v, want %v", got, want)
	}
	if got := keepAlive(t, b, a, lease).Groups; len(got) != 0 {
		t.Fatalf("groups of a session that left = %v, want none", got)
	}
}

func testNames(t *testing.T, f *fixture) {
	b := f.backend()
	s := open(t, b, 5*time.Second)
	for _, bad := range []string{"", ".", "..", "a b", "é", "x'; DROP TABLE t; --", strings.Repeat("a", 129)} {
		_, err := b.Acquire(ctxT(t), s, bad)
		var ne *simba.NameError
		if !errors.As(err, &ne) {
			t.Errorf("Acquire(%q): %v, want a *simba.NameError", bad, err)
		}
		if err := b.Release(ctxT(t), s, bad, 1); !errors.As(err, &ne) {
			t.Errorf("Release(%q): %v, want a *simba.NameError", bad, err)
		}
		if _, err := b.JoinGroup(ctxT(t), s, bad); !errors.As(err, &ne) {
			t.Errorf("JoinGroup(%q): %v, want a *simba.NameError", bad, err)
		}
	}
	long := strings.Repeat("Az9._:-", 19)[:128]
	for _, n := range []string{"CASE", "case", "Case", long} {
		if r := acquire(t, b, s, n); !r.Won || r.Token != 1 {
			t.Fatalf("Acquire(%q) = %+v, want a first term (names differing in case are distinct)", n, r)
		}
	}
	got := keepAlive(t, b, s, 5*time.Second, "CASE", "case", "Case", "cASE", long).Owned
	if want := map[string]uint64{"CASE": 1, "case": 1, "Case": 1, long: 1}; !maps.Equal(got, want) {
		t.Fatalf("leases = %v, want %v", got, want)
	}
}

func testMalformedSessionIDs(t *testing.T, f *fixture) {
	b := f.backend()
	for _, s := range []simba.SessionID{"", "nope", "0123456789ABCDEF0123456789ABCDEF", simba.SessionID(strings.Repeat("0", 33))} {
		if _, err := b.KeepAlive(ctxT(t), s, unsure(time.Second)); !errors.Is(err, simba.ErrSessionExpired) {
			t.Errorf("KeepAlive(%q): %v, want ErrSessionExpired", s, err)
		}
		if _, err := b.Acquire(ctxT(t), s, "n"); !errors.Is(err, simba.ErrSessionExpired) {
			t.Errorf("Acquire(%q): %v, want ErrSessionExpired", s, err)
		}
		if err := b.Release(ctxT(t), s, "n", 1); err != nil {
			t.Errorf("Release(%q): %v, want nil", s, err)
		}
		if err := b.CloseSession(ctxT(t), s); err != nil {
			t.Errorf("CloseSession(%q): %v, want nil", s, err)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, sqlcore.MaxLease + 1} {
		if _, err := b.OpenSession(ctxT(t), d); err == nil {
			t.Errorf("OpenSession(%v) succeeded, want an error", d)
		}
	}
}

func testMissingTables(t *testing.T, f *fixture) {
	b := f.backendWith(sqlcore.Options{TablePrefix: f.prefix})
	_, err := b.OpenSession(ctxT(t), time.Second)
	var mt *sqlcore.MissingTableError
	if !errors.As(err, &mt) || !errors.Is(err, f.h.Pkg.ErrSchemaMissing) {
		t.Fatalf("OpenSession without tables: %v, want a *MissingTableError", err)
	}
	pkg := f.h.Pkg.Name
	want := pkg + ": tables " + f.prefix + "session, " + f.prefix + "lease, " + f.prefix + "group_member, " + f.prefix +
		"lease_floor missing: run the migration (Options.Migrate) or apply " + pkg + ".Schema"
	if err.Error() != want {
		t.Fatalf("error = %q\nwant    %q", err, want)
	}

	// Applying the migration's statements by hand makes the same backend
	// work.
	f.applySchema(f.prefix)
	s := open(t, b, time.Second)

	// A table dropped later is reported the same way, naming it.
	if err := f.admin.Exec(ctxT(t), "DROP TABLE "+f.prefix+"lease"); err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctxT(t), s, "n")
	if !errors.As(err, &mt) || len(mt.Tables) != 1 || mt.Tables[0] != f.prefix+"lease" {
		t.Fatalf("Acquire after the lease table was dropped: %v, want a *MissingTableError for %slease", err, f.prefix)
	}
	if err := b.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if r := acquire(t, b, s, "n"); !r.Won {
		t.Fatalf("acquire after Migrate = %+v, want won", r)
	}
}

func testConcurrentMigrations(t *testing.T, f *fixture) {
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		b := f.backend()
		wg.Go(func() { _, errs[i] = b.OpenSession(ctxT(t), time.Second) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
}

func testClosedBackend(t *testing.T, f *fixture) {
	b := f.backend()
	s := open(t, b, time.Second)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := b.KeepAlive(ctxT(t), s, unsure(time.Second)); !errors.Is(err, f.h.Pkg.ErrClosed) {
		t.Fatalf("KeepAlive after Close: %v, want ErrClosed", err)
	}
	if _, err := b.Acquire(ctxT(t), s, "n"); !errors.Is(err, f.h.Pkg.ErrClosed) {
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
	// The caller's client still works: Close did not close it.
	var one int
	if err := f.scalar(ctxT(t), "SELECT 1", &one); err != nil || one != 1 {
		t.Fatalf("client after Close: %d, %v", one, err)
	}
}

func testCancelledContext(t *testing.T, f *fixture) {
	b := f.backend()
	s := open(t, b, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(ctx, s, "n"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := b.KeepAlive(ctx, s, unsure(time.Second)); !errors.Is(err, context.Canceled) {
		t.Fatalf("KeepAlive with a cancelled context: %v, want context.Canceled", err)
	}
	// The backend still works afterwards.
	if r := acquire(t, b, s, "n"); !r.Won {
		t.Fatalf("acquire after a cancelled call = %+v", r)
	}
}

func testCleanupDeletesExpiredSessions(t *testing.T, f *fixture) {
	b := f.backendWith(sqlcore.Options{TablePrefix: f.prefix, Migrate: true, CleanupInterval: -1})
	var dead []simba.SessionID
	for range 3 {
		s := open(t, b, 200*time.Millisecond)
		if _, err := b.JoinGroup(ctxT(t), s, "g"); err != nil {
			t.Fatal(err)
		}
		acquire(t, b, s, "own-"+string(s)[:6])
		dead = append(dead, s)
	}
	live := open(t, b, time.Minute)
	if _, err := b.JoinGroup(ctxT(t), live, "g"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)

	b.CleanupRound(context.Background(), time.Minute)

	count := func(q string) int {
		t.Helper()
		var n int
		if err := f.scalar(ctxT(t), q, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("SELECT COUNT(*) FROM " + f.prefix + "session"); n != 1 {
		t.Fatalf("%d session rows after cleanup, want the live one only", n)
	}
	if n := count("SELECT COUNT(*) FROM " + f.prefix + "group_member"); n != 1 {
		t.Fatalf("%d memberships after cleanup, want the live one only", n)
	}
	if n := count("SELECT COUNT(*) FROM " + f.prefix + "lease"); n != 3 {
		t.Fatalf("%d lease rows after cleanup, want 3: cleanup deletes no lease row", n)
	}
	// A lease of a deleted session is free and its counter continues.
	if r := acquire(t, b, live, "own-"+string(dead[0])[:6]); !r.Won || r.Token != 2 {
		t.Fatalf("acquire of a deleted session's lease = %+v, want token 2", r)
	}
}

func testCleanupGoroutineRuns(t *testing.T, f *fixture) {
	b := f.backendWith(sqlcore.Options{TablePrefix: f.prefix, Migrate: true, CleanupInterval: 50 * time.Millisecond})
	open(t, b, 100*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := f.scalar(ctxT(t), "SELECT COUNT(*) FROM "+f.prefix+"session", &n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired session still there after 5s of cleanup every 50ms")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
