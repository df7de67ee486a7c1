package sqltest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	simba "github.com/simba-go/simba/core"
)

// applySchema applies the script of the package's Schema to the tables of
// prefix by hand, as a DBA would: its statements, each ended by a
// semicolon and a blank line, in order.
func (f *fixture) applySchema(prefix string) {
	f.t.Helper()
	script, err := f.h.Schema(prefix)
	if err != nil {
		f.t.Fatal(err)
	}
	var stmts []string
	for _, q := range strings.Split(script, ";\n\n") {
		if q = strings.TrimSuffix(strings.TrimSpace(q), ";"); q != "" {
			stmts = append(stmts, q)
		}
	}
	if err := f.admin.ExecScript(ctxT(f.t), stmts); err != nil {
		f.t.Fatalf("apply the schema script: %v", err)
	}
}

// createOldSchema creates the tables of prefix as the versions before
// migration 2 did.
func (f *fixture) createOldSchema(prefix string) {
	f.t.Helper()
	tables := sqlcore.NewTables(prefix)
	stmts := make([]string, len(f.h.OldSchema))
	for i, q := range f.h.OldSchema {
		stmts[i] = tables.Expand(q)
	}
	if err := f.admin.ExecScript(ctxT(f.t), stmts); err != nil {
		f.t.Fatalf("create the old tables: %v", err)
	}
}

func openAs(t testing.TB, b Backend, d time.Duration, identity string) simba.SessionID {
	t.Helper()
	g, err := b.OpenSessionAs(ctxT(t), d, identity)
	if err != nil {
		t.Fatalf("OpenSessionAs(%q): %v", identity, err)
	}
	return g.ID
}

func holderOf(t testing.TB, b simba.HolderReader, name string) (simba.Holder, bool) {
	t.Helper()
	h, ok, err := b.Holder(ctxT(t), name)
	if err != nil {
		t.Fatalf("Holder(%q): %v", name, err)
	}
	return h, ok
}

// wantHolder checks the holder of name, and that its term began within
// a few seconds of now.
func wantHolder(t testing.TB, b simba.HolderReader, name string, s simba.SessionID, identity string, token uint64) simba.Holder {
	t.Helper()
	h, ok := holderOf(t, b, name)
	switch {
	case !ok:
		t.Fatalf("Holder(%q) = nobody, want %s (%q) at token %d", name, s, identity, token)
	case h.Session != s || h.Identity != identity || h.Token != token:
		t.Fatalf("Holder(%q) = %+v, want %s (%q) at token %d", name, h, s, identity, token)
	case h.Since.Location() != time.UTC || time.Since(h.Since).Abs() > 10*time.Second:
		t.Fatalf("Holder(%q) since %v, want a UTC time within 10s of now (%v)", name, h.Since, time.Now().UTC())
	}
	return h
}

// testMigrationUpgrade: tables made before migration 2 make a backend
// without Options.Migrate fail with an error naming the migration, until
// Migrate (or Options.Migrate, or the script applied by hand) adds the
// columns; the rows of the old version survive, and its statements still
// work on the new tables. A column dropped later is reported the same way,
// with the step that adds it.
func testMigrationUpgrade(t *testing.T, f *fixture) {
	if len(f.h.OldSchema) == 0 {
		t.Fatal("the harness has no OldSchema")
	}
	f.createOldSchema(f.prefix)
	const oldSID = "0123456789abcdef0123456789abcdef"
	insertOldSession := func(id string) {
		t.Helper()
		q := "INSERT INTO " + f.prefix + "session (id, expires_at, created_at) VALUES (?, " + f.h.Later(60) + ", " + f.h.Later(0) + ")"
		if err := f.admin.Exec(ctxT(t), q, id); err != nil {
			t.Fatalf("a session as the old version inserts it: %v", err)
		}
	}
	insertOldSession(oldSID)
	q := "INSERT INTO " + f.prefix + "lease (name, session_id, token, acquired_at) VALUES ('old-job', ?, 5, " + f.h.Later(-30) + ")"
	if err := f.admin.Exec(ctxT(t), q, oldSID); err != nil {
		t.Fatalf("a lease as the old version takes it: %v", err)
	}

	pkg := f.h.Pkg.Name
	wantMigration := 2
	cols := f.prefix + "session.identity, " + f.prefix + "session.lease_gen"
	if pkg == "simbapg" {
		cols += ", " + f.prefix + "lease.watched" // migration 6, PostgreSQL's alone
	}
	want := pkg + ": tables predate migration 2 (session identity): columns " + cols + " and tables " + f.prefix + "lease_floor, " + f.prefix + "semaphore missing: run the migration (Options.Migrate or Backend.Migrate) or apply " + pkg + ".Schema"
	// outdated checks the error of what on the old tables; fromServer: it
	// wraps the server's error about the column.
	outdated := func(what string, err error, fromServer bool) {
		t.Helper()
		var oe *sqlcore.OutdatedSchemaError
		var mt *sqlcore.MissingTableError
		if !errors.As(err, &oe) || !errors.Is(err, f.h.Pkg.ErrSchemaMissing) || errors.As(err, &mt) {
			t.Fatalf("%s on the old tables: %v, want an *OutdatedSchemaError", what, err)
		}
		if oe.Migration != wantMigration || err.Error() != want {
			t.Fatalf("%s: error = %q (migration %d)\nwant    %q", what, err, oe.Migration, want)
		}
		if fromServer != (oe.Err != nil) {
			t.Fatalf("%s: the error wraps %v, want the server's error: %v", what, oe.Err, fromServer)
		}
	}
	if _, err := f.h.Open(ctxT(t), f.h.URL(t, f.raw, ""), OpenOptions{Options: sqlcore.Options{TablePrefix: f.prefix}}); err == nil {
		t.Fatal("Open without Migrate on the old tables succeeded")
	} else {
		outdated("Open", err, false)
	}
	b := f.backendWith(sqlcore.Options{TablePrefix: f.prefix})
	_, err := b.OpenSession(ctxT(t), time.Second)
	outdated("OpenSession", err, false)
	_, _, err = b.Holder(ctxT(t), "old-job")
	outdated("Holder", err, false)

	// Nodes migrating at once all succeed.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		m := f.backendWith(sqlcore.Options{TablePrefix: f.prefix, Migrate: true})
		wg.Go(func() { _, errs[i] = m.OpenSessionAs(ctxT(t), time.Second, "migrating") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d migrating the old tables: %v", i, err)
		}
	}

	// The backend that failed works now; the old rows are intact, and a
	// session of the old version has no identity.
	s := openAs(t, b, 10*time.Second, "new-node")
	h, ok := holderOf(t, b, "old-job")
	if !ok || h.Session != oldSID || h.Identity != "" || h.Token != 5 {
		t.Fatalf("Holder(old-job) = %+v, %v; want the old session at token 5, no identity", h, ok)
	}
	if ago := time.Since(h.Since); ago < 20*time.Second || ago > 40*time.Second {
		t.Fatalf("Holder(old-job) since %v (%v ago), want about 30s ago", h.Since, ago)
	}
	if ka := keepAlive(t, b, oldSID, 10*time.Second, "old-job"); ka.Owned["old-job"] != 5 {
		t.Fatalf("keep-alive of the old session = %+v, want old-job at 5", ka)
	}
	insertOldSession("fedcba9876543210fedcba9876543210") // the old version's INSERT still works
	tok := acquire(t, b, s, "new-job").Token
	wantHolder(t, b, "new-job", s, "new-node", tok)

	// Idempotent: Migrate and the script again change nothing.
	if err := b.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate on up-to-date tables: %v", err)
	}
	f.applySchema(f.prefix)
	wantHolder(t, b, "new-job", s, "new-node", tok)

	// The script applied by hand upgrades old tables too.
	other := uniquePrefix()
	t.Cleanup(func() { f.dropTables(other) })
	f.createOldSchema(other)
	f.applySchema(other)
	f.applySchema(other)
	o := f.backendWith(sqlcore.Options{TablePrefix: other})
	sh := openAs(t, o, 10*time.Second, "by-hand")
	tok = acquire(t, o, sh, "job").Token
	wantHolder(t, o, "job", sh, "by-hand", tok)

	// A column dropped behind a ready backend's back is reported from the
	// server's error, then by the schema check, until migrated again.
	if err := f.admin.Exec(ctxT(t), "ALTER TABLE "+f.prefix+"session DROP COLUMN identity"); err != nil {
		t.Fatal(err)
	}
	want = pkg + ": tables predate migration 2 (session identity): column " + f.prefix +
		"session.identity missing: run the migration (Options.Migrate or Backend.Migrate) or apply " + pkg + ".Schema"
	_, err = b.OpenSessionAs(ctxT(t), time.Second, "x")
	outdated("OpenSessionAs after the column was dropped", err, true)
	_, _, err = b.Holder(ctxT(t), "new-job")
	outdated("Holder after the column was dropped", err, false)
	if err := b.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	s2 := openAs(t, b, 10*time.Second, "again")
	if r := acquire(t, b, s2, "again"); !r.Won {
		t.Fatalf("acquire after Migrate = %+v", r)
	}
	wantHolder(t, b, "again", s2, "again", 1)

	// Tables of migration 2 lack the column of migration 3, which no
	// statement reads any more: the ready backend goes on working, and a
	// new one refuses the tables until they are migrated.
	if err := f.admin.Exec(ctxT(t), "ALTER TABLE "+f.prefix+"session DROP COLUMN lease_gen"); err != nil {
		t.Fatal(err)
	}
	if ka := keepAlive(t, b, s2, 10*time.Second, "again"); ka.Owned["again"] != 1 {
		t.Fatalf("keep-alive without the lease_gen column = %+v, want again at 1", ka)
	}
	wantMigration = 3
	want = pkg + ": tables predate migration 3 (session lease generation): column " + f.prefix +
		"session.lease_gen missing: run the migration (Options.Migrate or Backend.Migrate) or apply " + pkg + ".Schema"
	late := f.backendWith(sqlcore.Options{TablePrefix: f.prefix})
	_, err = late.KeepAlive(ctxT(t), s2, unsure(10*time.Second))
	outdated("KeepAlive of a new backend after the lease_gen column was dropped", err, false)
	if err := b.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if ka := keepAlive(t, late, s2, 10*time.Second, "again"); ka.Owned["again"] != 1 {
		t.Fatalf("keep-alive after migration 3 = %+v, want again at 1", ka)
	}

	// Tables of migration 3 lack the floor table of migration 4: a new
	// backend names the step, and the migration creates the table.
	if err := f.admin.Exec(ctxT(t), "DROP TABLE "+f.prefix+"lease_floor"); err != nil {
		t.Fatal(err)
	}
	wantMigration = 4
	want = pkg + ": tables predate migration 4 (lease floor): table " + f.prefix +
		"lease_floor missing: run the migration (Options.Migrate or Backend.Migrate) or apply " + pkg + ".Schema"
	_, err = f.backendWith(sqlcore.Options{TablePrefix: f.prefix}).KeepAlive(ctxT(t), s2, unsure(10*time.Second))
	outdated("KeepAlive of a new backend after the floor table was dropped", err, false)
	migrated := f.backendWith(sqlcore.Options{TablePrefix: f.prefix, Migrate: true})
	if ka := keepAlive(t, migrated, s2, 10*time.Second, "again"); ka.Owned["again"] != 1 {
		t.Fatalf("keep-alive after migration 4 = %+v, want again at 1", ka)
	}

	// Tables of migration 4 lack the semaphore table of migration 5: a
	// new backend's permit acquire names the step, a ready one's names the
	// table, and the migration creates it. A slot's lease taken as a plain
	// lease before it is an ordinary row, whose token the slot's next term
	// starts above, and the semaphore's tokens then increase across slots.
	if err := f.admin.Exec(ctxT(t), "DROP TABLE "+f.prefix+"semaphore"); err != nil {
		t.Fatal(err)
	}
	p := simba.Permit{Semaphore: "again-sem", Permits: 2}
	wantMigration = 5
	want = pkg + ": tables predate migration 5 (semaphores): table " + f.prefix +
		"semaphore missing: run the migration (Options.Migrate or Backend.Migrate) or apply " + pkg + ".Schema"
	_, err = f.backendWith(sqlcore.Options{TablePrefix: f.prefix}).(simba.PermitAcquirer).AcquirePermit(ctxT(t), s2, p)
	outdated("AcquirePermit of a new backend without the semaphore table", err, false)
	var mt *sqlcore.MissingTableError
	if _, err := migrated.(simba.PermitAcquirer).AcquirePermit(ctxT(t), s2, p); !errors.As(err, &mt) ||
		!errors.Is(err, f.h.Pkg.ErrSchemaMissing) || !strings.Contains(err.Error(), f.prefix+"semaphore missing: run the migration") {
		t.Fatalf("AcquirePermit of a ready backend without the semaphore table: %v, want a *MissingTableError naming it", err)
	}
	if r := acquire(t, b, s2, "again-sem:0"); !r.Won || r.Token != 1 { // b was ready before the drop
		t.Fatalf("acquire of a slot's lease as a plain lease before migration 5 = %+v", r)
	}
	if err := b.Migrate(ctxT(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if r, err := f.backendWith(sqlcore.Options{TablePrefix: f.prefix}).(simba.PermitAcquirer).AcquirePermit(ctxT(t), s2, p); err != nil || !r.Won || r.Token != 2 {
		t.Fatalf("AcquirePermit after migration 5 = %+v, %v; want a win of slot 0 at token 2", r, err)
	}
	p.Slot = 1
	if r, err := migrated.(simba.PermitAcquirer).AcquirePermit(ctxT(t), s2, p); err != nil || !r.Won || r.Token != 3 {
		t.Fatalf("AcquirePermit of slot 1 after migration 5 = %+v, %v; want a win at token 3, above slot 0's", r, err)
	}
}
