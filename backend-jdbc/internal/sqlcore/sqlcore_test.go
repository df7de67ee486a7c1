package sqlcore

import (
	"context"
	"errors"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	simba "github.com/simba-go/simba/core"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var testPkg = NewPkg("simbatest")

func TestResolve(t *testing.T) {
	tests := []struct {
		give string
		ok   bool
	}{
		{give: "simba_", ok: true},
		{give: "_", ok: true},
		{give: "App1_simba_", ok: true},
		{give: "a" + strings.Repeat("b", 40), ok: true},
		{give: "a" + strings.Repeat("b", 41)},
		{give: "1simba_"},
		{give: "simba-"},
		{give: "simba_; DROP TABLE x; --"},
		{give: `simba"`},
		{give: "simba.x_"},
		{give: "é_"},
	}
	for _, tt := range tests {
		_, err := testPkg.Resolve(Options{TablePrefix: tt.give})
		if tt.ok != (err == nil) {
			t.Errorf("prefix %q: err = %v, want ok=%v", tt.give, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, testPkg.ErrInvalidOptions) || !strings.HasPrefix(err.Error(), "simbatest: TablePrefix: ")) {
			t.Errorf("prefix %q: %v, want a simbatest *OptionsError", tt.give, err)
		}
		if _, err := testPkg.Script("test", []Migration{{Version: 1, Name: "tables", Stmts: []string{"CREATE TABLE {session}"}}}, tt.give); tt.ok != (err == nil) {
			t.Errorf("Script(%q): err = %v, want ok=%v", tt.give, err, tt.ok)
		}
	}
	o, err := testPkg.Resolve(Options{})
	if err != nil || o.TablePrefix != "simba_" || o.CleanupInterval != time.Minute || o.Logger == nil {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
}

// testSteps are two migration steps: the tables, then a column.
var testSteps = []Migration{
	{Version: 1, Name: "tables", Stmts: []string{"CREATE TABLE IF NOT EXISTS {session} ({lease}, {member})", "CREATE INDEX {p}x"}},
	{Version: 2, Name: "session identity", Adds: []Column{{Table: "{session}", Name: "identity"}},
		Stmts: []string{"ALTER TABLE {session} ADD COLUMN IF NOT EXISTS identity text"}},
}

func TestScript(t *testing.T) {
	s, err := testPkg.Script("test", testSteps, "")
	if err != nil {
		t.Fatal(err)
	}
	want := `-- Simba tables for test, prefix "simba_". Idempotent: safe to apply again,
-- and to tables made by an earlier version, which it brings up to date.
-- Lease rows are deleted only by Sweep, which raises the floor: a token never goes back.

-- Migration 1: tables.

CREATE TABLE IF NOT EXISTS simba_session (simba_lease, simba_group_member);

CREATE INDEX simba_x;

-- Migration 2: session identity. Adds simba_session.identity.

ALTER TABLE simba_session ADD COLUMN IF NOT EXISTS identity text;
`
	if s != want {
		t.Fatalf("Script =\n%s\nwant\n%s", s, want)
	}
	stmts, err := testPkg.DDL(testSteps, "p_")
	if err != nil || len(stmts) != 3 || stmts[2] != "ALTER TABLE p_session ADD COLUMN IF NOT EXISTS identity text" {
		t.Fatalf("DDL = %q, %v", stmts, err)
	}
}

func TestParseURL(t *testing.T) {
	for _, tt := range []struct {
		give  string
		oneAt bool
		want  string // in the error; "" when accepted
	}{
		{give: "postgres://u:p@h:1/d"},
		{give: "POSTGRES://u@h/d"},
		{give: "mysql://u@h/d", want: `scheme "mysql": want postgres://, postgresql://`},
		{give: "no scheme at all", want: "no scheme"},
		{give: "postgres://u:secretpw@h/d#x", want: "cannot tell its user information"},
		{give: "postgres://u:secret@pw@h/d", oneAt: true, want: "cannot tell its user information"},
		{give: "postgres://u:secret@pw@h/d"},
		{give: "postgres://u:secretpw@h/d?x=a@b", want: "cannot tell its user information"},
		{give: "postgres://u:secret%zzpw@h/d", want: "a '%' not followed by two hexadecimal digits"},
		{give: "postgres:u:secretpw@h/d", want: `no "//" after "postgres:"`},
		{give: "postgres://u:p@h1:5432,h2/d"},
		{give: "postgres://u:p@h1,h2,h3:1/d?x=1"},
		{give: "postgres://u:secret/pw@h1:5432,h2/d", want: "not a valid URL"},
	} {
		_, err := testPkg.ParseURL(tt.give, tt.oneAt, "postgres", "postgresql")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ParseURL(%q): %v", tt.give, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, testPkg.ErrInvalidOptions)):
			t.Errorf("ParseURL(%q): %v, want an *OptionsError saying %q", tt.give, err, tt.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("ParseURL(%q): the error quotes the URL: %v", tt.give, err)
		}
	}
}

func TestNewFence(t *testing.T) {
	good := FenceTable{Table: "ledger_state", Key: "id", Token: "fencing_token", Columns: []string{"last_batch"}}
	with := func(change func(*FenceTable)) FenceTable {
		t := good
		t.Columns = append([]string(nil), good.Columns...)
		change(&t)
		return t
	}
	tests := []struct {
		name     string
		postgres bool
		give     FenceTable
		wantErr  string // empty: NewFence succeeds
	}{
		{name: "postgres", postgres: true, give: good},
		{name: "mysql", give: good},
		{name: "schema", postgres: true, give: with(func(t *FenceTable) { t.Table = "ledger.state" })},
		{name: "no columns", give: with(func(t *FenceTable) { t.Columns = nil })},
		{name: "empty table", postgres: true, give: with(func(t *FenceTable) { t.Table = "" }), wantErr: `Table ""`},
		{name: "injection", postgres: true, give: with(func(t *FenceTable) { t.Table = "t; DROP TABLE x" }), wantErr: "not a plain identifier"},
		{name: "quote", give: with(func(t *FenceTable) { t.Key = "id`" }), wantErr: "Key"},
		{name: "two dots", postgres: true, give: with(func(t *FenceTable) { t.Table = "a.b.c" }), wantErr: `Table "b.c"`},
		{name: "empty schema", postgres: true, give: with(func(t *FenceTable) { t.Table = ".state" }), wantErr: `Table ""`},
		{name: "leading digit", postgres: true, give: with(func(t *FenceTable) { t.Token = "1token" }), wantErr: "Token"},
		{name: "too long", postgres: true, give: with(func(t *FenceTable) { t.Columns = []string{strings.Repeat("c", 64)} }), wantErr: "Columns[0]"},
		{name: "token is key", postgres: true, give: with(func(t *FenceTable) { t.Token = "id" }), wantErr: `Token "id" is also Key`},
		{name: "column is token", give: with(func(t *FenceTable) { t.Columns = []string{"FENCING_TOKEN"} }), wantErr: "is also Token"},
		{name: "column twice", postgres: true, give: with(func(t *FenceTable) { t.Columns = []string{"a", "b", "a"} }), wantErr: `Columns[2] "a" is also Columns[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := testPkg.NewFence(tt.postgres, tt.give)
			if tt.wantErr == "" {
				if err != nil || f == nil {
					t.Fatalf("NewFence = %v, %v; want a fence", f, err)
				}
				return
			}
			if !errors.Is(err, testPkg.ErrInvalidFence) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewFence error = %v; want ErrInvalidFence saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestFenceStatements(t *testing.T) {
	table := FenceTable{Table: "ledger.state", Key: "key", Token: "token", Columns: []string{"a", "b"}}
	tests := []struct {
		name                        string
		postgres                    bool
		wantUpdate, wantCur, wantIn string
	}{
		{
			name:       "postgres",
			postgres:   true,
			wantUpdate: `UPDATE "ledger"."state" SET "a" = $1, "b" = $2, "token" = $3 WHERE "key" = $4 AND "token" <= $3`,
			wantCur:    `SELECT "token" FROM "ledger"."state" WHERE "key" = $1 FOR UPDATE`,
			wantIn:     `INSERT INTO "ledger"."state" ("key", "token") VALUES ($1, 0) ON CONFLICT DO NOTHING`,
		},
		{
			name:       "mysql",
			wantUpdate: "UPDATE `ledger`.`state` SET `a` = ?, `b` = ?, `token` = ? WHERE `key` = ? AND `token` <= ?",
			wantCur:    "SELECT `token` FROM `ledger`.`state` WHERE `key` = ? FOR UPDATE",
			wantIn:     "INSERT INTO `ledger`.`state` (`key`, `token`) VALUES (?, 0) ON DUPLICATE KEY UPDATE `key` = `key`",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := testPkg.NewFence(tt.postgres, table)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ what, got, want string }{
				{"update", f.Update, tt.wantUpdate}, {"current", f.Current, tt.wantCur}, {"insert", f.Insert, tt.wantIn},
			} {
				if c.got != c.want {
					t.Errorf("%s:\n got %s\nwant %s", c.what, c.got, c.want)
				}
			}
		})
	}
}

// panicRunner fails the test if a statement reaches it.
type panicRunner struct{ t *testing.T }

func (r panicRunner) Exec(context.Context, string, ...any) (int64, error) {
	r.t.Fatal("a statement was sent")
	return 0, nil
}

func (r panicRunner) Token(context.Context, string, ...any) (int64, bool, error) {
	r.t.Fatal("a statement was sent")
	return 0, false, nil
}

func TestFenceRefusesBadArguments(t *testing.T) {
	f, err := testPkg.NewFence(true, FenceTable{Table: "t", Key: "k", Token: "tok", Columns: []string{"v"}})
	if err != nil {
		t.Fatal(err)
	}
	r := panicRunner{t}
	for _, c := range []struct {
		name   string
		token  uint64
		values []any
		want   string
	}{
		{"token above int64", math.MaxInt64 + 1, []any{"v"}, "does not fit a BIGINT"},
		{"too few values", 1, nil, "0 values for 1 columns"},
		{"too many values", 1, []any{"v", "w"}, "2 values for 1 columns"},
	} {
		if _, err := f.Write(t.Context(), r, "k", c.token, c.values); !errors.Is(err, testPkg.ErrInvalidFence) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrInvalidFence saying %q", c.name, err, c.want)
		}
	}
}

// fakeDialect answers every statement at once, except those its block
// function holds.
type fakeDialect struct {
	block    func(ctx context.Context) error // run by KeepAlive
	closeHit chan struct{}                   // Close waits for it when set
	schema   *fakeSchema                     // nil: every table and column exists
}

// fakeSchema is the columns a fake database lacks, and what it was asked.
type fakeSchema struct {
	mu       sync.Mutex
	lacks    []Column // expanded
	migrated [][]string
	opened   []string       // identities of the sessions opened
	holder   error          // returned by Holder
	holders  map[string]int // Holder calls by name
}

func (d fakeDialect) Missing(_ context.Context, cols []Column) ([]string, []Column, error) {
	if d.schema == nil {
		return nil, nil, nil
	}
	d.schema.mu.Lock()
	defer d.schema.mu.Unlock()
	var out []Column
	for _, c := range cols {
		if slices.Contains(d.schema.lacks, c) {
			out = append(out, c)
		}
	}
	return nil, out, nil
}

func (d fakeDialect) Migrate(_ context.Context, stmts []string) error {
	if d.schema != nil {
		d.schema.mu.Lock()
		defer d.schema.mu.Unlock()
		d.schema.migrated = append(d.schema.migrated, stmts)
		d.schema.lacks = nil
	}
	return nil
}

func (fakeDialect) Prepare(context.Context) error { return nil }

func (d fakeDialect) OpenSession(_ context.Context, _ string, _ time.Duration, identity string) error {
	if d.schema != nil {
		d.schema.mu.Lock()
		defer d.schema.mu.Unlock()
		d.schema.opened = append(d.schema.opened, identity)
	}
	return nil
}

func (d fakeDialect) ListHolders(context.Context, string, string, string, int, int) ([]simba.HeldLease, string, int, error) {
	return nil, "", 0, nil
}

func (d fakeDialect) Holder(_ context.Context, name string) (simba.Holder, bool, error) {
	if d.schema == nil {
		return simba.Holder{}, false, nil
	}
	d.schema.mu.Lock()
	defer d.schema.mu.Unlock()
	if d.schema.holders == nil {
		d.schema.holders = map[string]int{}
	}
	d.schema.holders[name]++
	if d.schema.holder != nil {
		return simba.Holder{}, false, d.schema.holder
	}
	return simba.Holder{Session: "s", Identity: "i", Token: 7}, true, nil
}

func (d fakeDialect) KeepAlive(ctx context.Context, _ string, _ time.Duration, _ []string) (simba.KeepAliveReply, map[string]uint64, bool, error) {
	return simba.KeepAliveReply{}, nil, false, d.block(ctx)
}
func (fakeDialect) Acquire(context.Context, string, string) (uint64, bool, bool, error) {
	return 1, true, true, nil
}
func (fakeDialect) AcquirePermit(context.Context, string, simba.Permit) (PermitResult, error) {
	return PermitResult{Token: 1, Won: true, Live: true}, nil
}
func (fakeDialect) Release(context.Context, string, string, uint64) error { return nil }
func (fakeDialect) JoinGroup(context.Context, string, string) (int, bool, error) {
	return 1, true, nil
}
func (fakeDialect) LeaveGroup(context.Context, string, string) error { return nil }
func (fakeDialect) CloseSession(context.Context, string) error       { return nil }
func (fakeDialect) Cleanup(context.Context, int) (int, error)        { return 0, nil }
func (fakeDialect) Sweep(context.Context, time.Duration, string, int) (string, int, error) {
	return "", 0, nil
}
func (fakeDialect) Warnings(context.Context) []simba.Warning { return nil }

// Undefined recognises the errors of undefinedColumn, as a column's.
func (fakeDialect) Undefined(err error) (string, bool, bool) {
	var u undefinedColumn
	if errors.As(err, &u) {
		return string(u), false, true
	}
	return "", false, false
}

type undefinedColumn string

func (u undefinedColumn) Error() string { return string(u) }
func (d fakeDialect) Close() {
	if d.closeHit != nil {
		<-d.closeHit
	}
}

func newFake(t *testing.T, d fakeDialect) *Backend {
	t.Helper()
	return newFakeWith(t, d, Options{CleanupInterval: -1})
}

func newFakeWith(t *testing.T, d fakeDialect, o Options) *Backend {
	t.Helper()
	b, err := New(Config{Pkg: testPkg, Database: "fake", Options: o, Migrations: testSteps,
		Dialect: func(Tables) Dialect { return d }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCloseEndsCallsInFlight: a call waiting for the server when Close
// runs fails with ErrClosed at once, and later calls too.
func TestCloseEndsCallsInFlight(t *testing.T) {
	started := make(chan struct{})
	b := newFake(t, fakeDialect{block: func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}})
	s, err := b.OpenSession(t.Context(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := b.KeepAlive(context.Background(), s.ID, simba.KeepAliveRequest{Lease: time.Second})
		errc <- err
	}()
	<-started
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, testPkg.ErrClosed) {
		t.Fatalf("call in flight: %v, want ErrClosed", err)
	}
	if _, err := b.Acquire(t.Context(), s.ID, "n"); !errors.Is(err, testPkg.ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
}

// TestCloseIsBounded: Close returns after closeTimeout even when closing
// the client hangs, says so, and the closing goes on.
func TestCloseIsBounded(t *testing.T) {
	defer func(d time.Duration) { closeTimeout = d }(closeTimeout)
	closeTimeout = 50 * time.Millisecond
	release := make(chan struct{})
	b := newFake(t, fakeDialect{closeHit: release})
	start := time.Now()
	err := b.Close()
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Close took %v, want about %v", elapsed, closeTimeout)
	}
	if err == nil || !strings.Contains(err.Error(), "did not close within 50ms") {
		t.Errorf("Close = %v, want an error saying the client goes on closing", err)
	}
	close(release) // the background close ends; goleak checks it
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

// TestOutdatedSchema: tables that lack a column of a later step fail with
// an error naming the step until migrated; with Options.Migrate the first
// call migrates, every step in order.
func TestOutdatedSchema(t *testing.T) {
	lacks := []Column{{Table: "simba_session", Name: "identity"}}
	sch := &fakeSchema{lacks: lacks}
	b := newFake(t, fakeDialect{schema: sch})
	defer b.Close()
	_, err := b.OpenSession(t.Context(), time.Second)
	var oe *OutdatedSchemaError
	if !errors.As(err, &oe) || !errors.Is(err, testPkg.ErrSchemaMissing) || oe.Migration != 2 {
		t.Fatalf("OpenSession on outdated tables: %v, want an *OutdatedSchemaError for migration 2", err)
	}
	want := "simbatest: tables predate migration 2 (session identity): column simba_session.identity missing: " +
		"run the migration (Options.Migrate or Backend.Migrate) or apply simbatest.Schema"
	if err.Error() != want {
		t.Fatalf("error = %q\nwant    %q", err, want)
	}
	if _, _, err := b.Holder(t.Context(), "n"); !errors.As(err, &oe) {
		t.Fatalf("Holder on outdated tables: %v, want an *OutdatedSchemaError", err)
	}
	if err := b.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OpenSessionAs(t.Context(), time.Second, "me"); err != nil {
		t.Fatalf("OpenSessionAs after Migrate: %v", err)
	}

	// The server says a column is missing: the same error, and the next
	// call checks the schema again, which migrates with Options.Migrate.
	sch = &fakeSchema{holder: undefinedColumn(`column s.identity does not exist`)}
	b = newFakeWith(t, fakeDialect{schema: sch}, Options{CleanupInterval: -1, Migrate: true})
	defer b.Close()
	if _, _, err := b.Holder(t.Context(), "n"); !errors.As(err, &oe) || oe.Migration != 2 || oe.Err == nil {
		t.Fatalf("Holder when the server lacks the column: %v, want an *OutdatedSchemaError for migration 2", err)
	}
	sch.mu.Lock()
	sch.lacks, sch.holder = lacks, nil
	sch.mu.Unlock()
	if h, ok, err := b.Holder(t.Context(), "n"); err != nil || !ok || h.Token != 7 {
		t.Fatalf("Holder after the schema check = %+v, %v, %v", h, ok, err)
	}
	sch.mu.Lock()
	defer sch.mu.Unlock()
	if len(sch.migrated) != 1 || len(sch.migrated[0]) != 3 {
		t.Fatalf("migrations run = %q, want one run of the three statements", sch.migrated)
	}
}

// TestIdentityChecked: OpenSessionAs refuses what WithIdentity refuses,
// before any statement, and passes the rest through.
func TestIdentityChecked(t *testing.T) {
	sch := &fakeSchema{}
	b := newFake(t, fakeDialect{schema: sch})
	defer b.Close()
	for _, bad := range []string{strings.Repeat("a", simba.MaxIdentity+1), "a\x00b", "\xff", "tab\there", "é" + strings.Repeat("a", simba.MaxIdentity-1)} {
		if _, err := b.OpenSessionAs(t.Context(), time.Second, bad); !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("OpenSessionAs(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
	good := []string{"", "host:42", strings.Repeat("é", simba.MaxIdentity/2), "node a (eu-west)"}
	for _, id := range good {
		if _, err := b.OpenSessionAs(t.Context(), time.Second, id); err != nil {
			t.Errorf("OpenSessionAs(%q): %v", id, err)
		}
	}
	if _, _, err := b.Holder(t.Context(), "bad/name"); !errors.Is(err, simba.ErrInvalidName) {
		t.Errorf("Holder(bad/name): %v, want ErrInvalidName", err)
	}
	sch.mu.Lock()
	defer sch.mu.Unlock()
	if !slices.Equal(sch.opened, good) || len(sch.holders) != 0 {
		t.Errorf("sessions opened with %q and holders asked %v, want %q and none", sch.opened, sch.holders, good)
	}
}

func TestWaitBound(t *testing.T) {
	if _, ok := WaitBound(context.Background()); ok {
		t.Fatal("a bound without a deadline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if d, ok := WaitBound(ctx); !ok || d > 750*time.Millisecond || d < 700*time.Millisecond {
		t.Fatalf("WaitBound with a second left = %v, %v; want about 750ms", d, ok)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if d, ok := WaitBound(past); !ok || d != 0 {
		t.Fatalf("WaitBound past the deadline = %v, %v; want 0", d, ok)
	}
}

// PrefixEnd bounds the names of a prefix from above: every name that
// starts with the prefix sorts below it, byte-wise, and the first name
// after them does not.
func TestPrefixEnd(t *testing.T) {
	for _, tt := range []struct{ give, want string }{
		{"", "{"},
		{"job-", "job."},
		{"a", "b"},
		{"az", "a{"},
		{"Z", "["},
		{"9", ":"},
	} {
		if got := PrefixEnd(tt.give); got != tt.want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tt.give, got, tt.want)
		}
		for _, name := range []string{tt.give, tt.give + "z", tt.give + strings.Repeat("z", 10), tt.give + "-"} {
			if name != "" && name >= tt.want {
				t.Errorf("%q, of prefix %q, is not below PrefixEnd %q", name, tt.give, tt.want)
			}
		}
	}
}

func TestCheckHosts(t *testing.T) {
	for _, tt := range []struct {
		give    string
		localOK bool
		want    string // in the error; "" when accepted
	}{
		{give: "postgres://u@h:1/d"},
		{give: "postgres://u@h1:1,h2:2,10.0.0.1:3/d"},
		{give: "postgres://u@[::1]:3/d"},
		{give: "postgres://u@/d", localOK: true},
		{give: "postgres://u@:5433/d", localOK: true},
		{give: "postgres://u@:0/d", localOK: true, want: `port "0"`},
		{give: "mysql://u@/d", want: "no host"},
		{give: "mysql://u@:3306/d", want: `no host before ":3306"`},
		{give: "postgres://u@h1:1,:2/d", localOK: true, want: `host 2 of 2: no host before ":2"`},
		{give: "postgres://u@h:1:99/d", want: `port "1:99": want a number from 1 to 65535`},
		{give: "postgres://u@h1:1,h2:1:99/d", want: `host 2 of 2: port "1:99"`},
		{give: "postgres://u@h:99999/d", want: `port "99999"`},
	} {
		u, err := url.Parse(tt.give)
		if err != nil {
			t.Fatal(err)
		}
		err = testPkg.CheckHosts(u, tt.localOK)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckHosts(%q): %v", tt.give, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, simba.ErrInvalidURL)):
			t.Errorf("CheckHosts(%q): %v, want an *OptionsError about the URL saying %q", tt.give, err, tt.want)
		}
	}
}

// TestPingUntil: a ping that a driver's timeout cut is sent again until
// ctx ends, and only then; any other error, or any error without a
// deadline in ctx, is the answer at once.
func TestPingUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cut := errors.New("driver timeout")
		other := errors.New("refused")
		silent := func(err error) bool { return errors.Is(err, cut) }
		calls := 0
		timedOut := func(ctx context.Context) error {
			calls++
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
				return cut
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := PingUntil(ctx, timedOut, silent)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "never answered: driver timeout") ||
			time.Since(start) != 5500*time.Millisecond || calls != 6 {
			t.Errorf("PingUntil = %v after %v and %d pings, want the deadline after 5.5s and 6 pings", err, time.Since(start), calls)
		}
		calls = 0
		if err := PingUntil(t.Context(), timedOut, silent); !errors.Is(err, cut) || calls != 1 {
			t.Errorf("without a deadline: %v after %d pings, want the driver's timeout after one", err, calls)
		}
		calls = 0
		ctx, cancel = context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		err = PingUntil(ctx, func(context.Context) error { calls++; return other }, silent)
		if !errors.Is(err, other) || calls != 1 {
			t.Errorf("another error: %v after %d pings, want it after one", err, calls)
		}
		calls = 0
		err = PingUntil(ctx, func(context.Context) error { calls++; return cut }, silent)
		if !errors.Is(err, cut) || calls != 1 {
			t.Errorf("a ping failing at once: %v after %d pings, want it after one: an answer, not silence", err, calls)
		}
		pings := 0
		err = PingUntil(ctx, func(ctx context.Context) error {
			if pings++; pings < 3 {
				return timedOut(ctx)
			}
			return nil
		}, silent)
		if err != nil || pings != 3 {
			t.Errorf("a server answering the third ping: %v after %d pings, want success after 3", err, pings)
		}
	})
}
