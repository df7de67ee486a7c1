package sqltest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

func testMissingTables(t *testing.T, f *fixture) {
	b := f.backendWith(sqlcore.Options{TablePrefix: f.prefix})
	_, err := b.OpenSession(ctxT(t), time.Second)
	var mt *sqlcore.MissingTableError
	if !errors.As(err, &mt) || !errors.Is(err, f.h.Pkg.ErrSchemaMissing) {
		t.Fatalf("OpenSession without tables: %v, want a *MissingTableError", err)
	}
	pkg := f.h.Pkg.Name
	want := pkg + ": tables " + f.prefix + "session, " + f.prefix + "lease, " + f.prefix + "group_member, " + f.prefix +
		"lease_floor, " + f.prefix + "semaphore missing: run the migration (Options.Migrate) or apply " + pkg + ".Schema"
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

// testClosedBackend: closing a backend made by New leaves the caller's
// client working (the conformance suite checks the rest of Close).
func testClosedBackend(t *testing.T, f *fixture) {
	if err := f.backend().Close(); err != nil {
		t.Fatal(err)
	}
	var one int
	if err := f.scalar(ctxT(t), "SELECT 1", &one); err != nil || one != 1 {
		t.Fatalf("client after Close: %d, %v", one, err)
	}
}

// testCleanupDeletesExpiredSessions: the cleanup of a backend deletes the
// expired sessions and their memberships, and no lease row, within a few
// of its intervals.
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

	// A backend that cleans up every 50ms, from its first call on.
	c := f.backendWith(sqlcore.Options{TablePrefix: f.prefix, CleanupInterval: 50 * time.Millisecond})
	holderOf(t, c, "nobody")

	count := func(q string) int {
		t.Helper()
		var n int
		if err := f.scalar(ctxT(t), q, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sessions := func() int { return count("SELECT COUNT(*) FROM " + f.prefix + "session") }
	members := func() int { return count("SELECT COUNT(*) FROM " + f.prefix + "group_member") }
	for deadline := time.Now().Add(5 * time.Second); sessions() != 1 || members() != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d session rows and %d memberships after 5s of cleanup every 50ms, want the live one only", sessions(), members())
		}
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
