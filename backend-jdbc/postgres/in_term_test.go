package simbapg

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// inTermLease is the lease of the clients of the fenced-transaction tests:
// short, so that a stopped holder's session expires soon.
const inTermLease = 2 * time.Second

// inTermFixture is a backend's tables and a table of the user's own, on
// the test server, dropped when the test ends.
type inTermFixture struct {
	t      *testing.T
	raw    string
	prefix string
	table  string
	pool   *pgxpool.Pool // the user's own pool, not the backend's
}

func newInTermFixture(t *testing.T) *inTermFixture {
	t.Helper()
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_POSTGRES_URL")
	id := fmt.Sprintf("it%08x_", rand.Uint32())
	f := &inTermFixture{t: t, raw: raw, prefix: id, table: id + "ledger", pool: newPool(t, raw, 0)}
	ctx := t.Context()
	b, err := Open(ctx, raw, Options{TablePrefix: f.prefix, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if _, err := f.pool.Exec(ctx, "CREATE TABLE "+f.table+" (writer text NOT NULL, token bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, tbl := range []string{f.table, f.prefix + "session", f.prefix + "lease", f.prefix + "group_member", f.prefix + "lease_floor", f.prefix + "schema_version"} {
			_, _ = f.pool.Exec(ctx, "DROP TABLE IF EXISTS "+tbl)
		}
	})
	return f
}

// client returns a client of its own backend on the fixture's tables.
func (f *inTermFixture) client() *simba.Client {
	f.t.Helper()
	b, err := Open(f.t.Context(), f.raw, Options{TablePrefix: f.prefix})
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: inTermLease}))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = c.Close(context.Background())
		_ = b.Close()
	})
	return c
}

func (f *inTermFixture) opts() TermTx { return TermTx{TablePrefix: f.prefix} }

// write records writer at token in the user's table.
func (f *inTermFixture) write(writer string, token uint64) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+f.table+" (writer, token) VALUES ($1, $2)", writer, int64(token))
		return err
	}
}

// rows returns the writers of the user's table, in token order.
func (f *inTermFixture) rows() []string {
	f.t.Helper()
	rows, err := f.pool.Query(f.t.Context(), "SELECT writer FROM "+f.table+" ORDER BY token")
	if err != nil {
		f.t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

func (f *inTermFixture) wantRows(want ...string) {
	f.t.Helper()
	if got := f.rows(); strings.Join(got, ",") != strings.Join(want, ",") {
		f.t.Fatalf("rows of the user's table = %q, want %q", got, want)
	}
}

// The story: a holder process is stopped (SIGSTOP) with its transaction
// open; its session expires, another node takes over and writes; then the
// holder resumes. Its commit fails, its row never appears, and the take-over
// waited at most the lease plus the transaction's bound.
func TestInTermStoppedHolderCommitsNothing(t *testing.T) {
	f := newInTermFixture(t)
	h := startHolder(t, f, "inside")
	h.expect("in transaction")
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	c := f.client()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lt, err := c.Lock("job").Acquire(ctx)
	if err != nil {
		t.Fatalf("take-over while the holder is stopped: %v", err)
	}
	waited := time.Since(stopped)
	if lt.Token() <= h.token {
		t.Fatalf("take-over token %d, want above the stopped holder's %d", lt.Token(), h.token)
	}
	if err := InTermTx(ctx, f.pool, lt.Term, f.opts(), f.write("taker", lt.Token())); err != nil {
		t.Fatalf("the new owner's transaction: %v", err)
	}
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	h.send("commit")
	res := h.expect("result")
	if !strings.Contains(res, "term expired: true") {
		t.Errorf("the resumed holder's InTerm = %q, want an error matching simba.ErrTermExpired", res)
	}
	f.wantRows("taker")
	// The session expires a lease after its last keep-alive, and the
	// server ends the open transaction at most that long after it began.
	if bound := 2*inTermLease + 3*time.Second; waited > bound {
		t.Errorf("the take-over waited %v for the stopped holder, want at most %v", waited, bound)
	}
	t.Logf("the take-over waited %v behind the stopped holder's transaction (lease %v)", waited, inTermLease)
	h.wait()
}

// A holder stopped before its transaction begins: it resumes after the
// take-over, and its transaction writes nothing.
func TestInTermHolderStoppedBeforeItsTransaction(t *testing.T) {
	f := newInTermFixture(t)
	h := startHolder(t, f, "before")
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c := f.client()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	lt, err := c.Lock("job").Acquire(ctx)
	if err != nil {
		t.Fatalf("take-over while the holder is stopped: %v", err)
	}
	if err := InTermTx(ctx, f.pool, lt.Term, f.opts(), f.write("taker", lt.Token())); err != nil {
		t.Fatalf("the new owner's transaction: %v", err)
	}
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	h.send("begin")
	if res := h.expect("result"); !strings.Contains(res, "term expired: true") {
		t.Errorf("the resumed holder's InTerm = %q, want an error matching simba.ErrTermExpired", res)
	}
	f.wantRows("taker")
	h.wait()
}

// A term whose lease row names another term (changed by hand, or lost by a
// promotion) writes nothing, though the term is valid locally: the check is
// the database's, not the clock's.
func TestInTermRowOfAnotherTermWritesNothing(t *testing.T) {
	f := newInTermFixture(t)
	for _, level := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(level), func(t *testing.T) {
			c := f.client()
			name := "row-" + strings.ReplaceAll(string(level), " ", "-")
			lt, err := c.Lock(name).Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			opts := f.opts()
			opts.TxOptions.IsoLevel = level
			if err := InTermTx(t.Context(), f.pool, lt.Term, opts, f.write("holder-"+name, lt.Token())); err != nil {
				t.Fatalf("InTerm of a held term at %s: %v", level, err)
			}
			if _, err := f.pool.Exec(t.Context(), "UPDATE "+f.prefix+"lease SET token = token + 1 WHERE name = $1", name); err != nil {
				t.Fatal(err)
			}
			err = InTermTx(t.Context(), f.pool, lt.Term, opts, f.write("stale-"+name, lt.Token()))
			if !errors.Is(err, simba.ErrTermExpired) {
				t.Fatalf("InTerm at %s after the lease row changed = %v, want an error matching simba.ErrTermExpired", level, err)
			}
			if !lt.Valid() {
				t.Fatal("the term ended locally: the check under test is the row's")
			}
		})
	}
	for _, w := range f.rows() {
		if strings.HasPrefix(w, "stale-") {
			t.Errorf("row %q was written after the lease row changed", w)
		}
	}
}

// While a transaction in a term runs, the lease row is share-locked: a
// take-over, a release or a sweep, which must write it, waits.
func TestInTermHoldsTheLeaseRow(t *testing.T) {
	f := newInTermFixture(t)
	c := f.client()
	lt, err := c.Lock("locked").Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	in, out := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- InTermTx(t.Context(), f.pool, lt.Term, f.opts(), func(ctx context.Context, tx pgx.Tx) error {
			close(in)
			<-out
			return f.write("holder", lt.Token())(ctx, tx)
		})
	}()
	<-in
	tx, err := f.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), "SET LOCAL lock_timeout = '200ms'"); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(t.Context(), "UPDATE "+f.prefix+"lease SET session_id = NULL WHERE name = 'locked'")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Errorf("a write of the lease row during the transaction = %v, want lock_not_available (55P03)", err)
	}
	close(out)
	if err := <-done; err != nil {
		t.Fatalf("InTerm: %v", err)
	}
	f.wantRows("holder")
}

// A serialization failure is returned as it is, so that a retry loop
// recognises it and runs the transaction again; the retry commits.
func TestInTermComposesWithSerializationRetries(t *testing.T) {
	f := newInTermFixture(t)
	c := f.client()
	lt, err := c.Lock("counter").Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := f.pool.Exec(ctx, "INSERT INTO "+f.table+" (writer, token) VALUES ('counter', 0)"); err != nil {
		t.Fatal(err)
	}
	opts := f.opts()
	opts.TxOptions.IsoLevel = pgx.Serializable
	read := make(chan struct{})
	proceed := make(chan struct{})
	attempts := 0
	bump := func(ctx context.Context, tx pgx.Tx) error {
		attempts++
		var n int64
		if err := tx.QueryRow(ctx, "SELECT token FROM "+f.table+" WHERE writer = 'counter'").Scan(&n); err != nil {
			return err
		}
		if attempts == 1 {
			close(read)
			<-proceed // a concurrent transaction changes the row meanwhile
		}
		_, err := tx.Exec(ctx, "UPDATE "+f.table+" SET token = $1 WHERE writer = 'counter'", n+1)
		return err
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for range 5 {
			err = InTermTx(ctx, f.pool, lt.Term, opts, bump)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "40001" {
				break
			}
		}
		done <- err
	}()
	<-read
	if _, err := f.pool.Exec(ctx, "UPDATE "+f.table+" SET token = token + 10 WHERE writer = 'counter'"); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-done; err != nil {
		t.Fatalf("InTerm with retries of serialization failures: %v", err)
	}
	if attempts < 2 {
		t.Fatalf("%d attempt(s): the concurrent change caused no serialization failure, nothing was retried", attempts)
	}
	var n int64
	if err := f.pool.QueryRow(ctx, "SELECT token FROM "+f.table+" WHERE writer = 'counter'").Scan(&n); err != nil || n != 11 {
		t.Fatalf("counter = %d, %v; want 11 (the concurrent 10 and the retried 1)", n, err)
	}
}

// Bad arguments are refused before any statement.
func TestInTermRefusesBadArguments(t *testing.T) {
	f := newInTermFixture(t)
	c := f.client()
	lt, err := c.Lock("args").Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, pgx.Tx) error { return nil }
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"nil handle", InTerm(t.Context(), nil, lt.Term, noop), simba.ErrInvalidArgument},
		{"nil term", InTerm(t.Context(), f.pool, nil, noop), simba.ErrInvalidArgument},
		{"nil function", InTerm(t.Context(), f.pool, lt.Term, nil), simba.ErrInvalidArgument},
		{"hostile prefix", InTermTx(t.Context(), f.pool, lt.Term, TermTx{TablePrefix: "x; DROP TABLE y; --"}, noop), simba.ErrInvalidArgument},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want an error matching %v", tc.name, tc.err, tc.want)
		}
	}
	if err := lt.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := InTermTx(t.Context(), f.pool, lt.Term, f.opts(), noop); !errors.Is(err, simba.ErrTermExpired) {
		t.Errorf("InTerm of a released term = %v, want an error matching simba.ErrTermExpired", err)
	}
}

// holder is a process of the test binary that holds the lock "job" and
// runs a transaction in its term (runInTermHolder).
type holder struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	token uint64
}

// startHolder starts a holder process on f's tables and waits for its
// term. With when "inside" it stops inside its transaction until told
// "commit"; with "before" it waits for "begin" before the transaction.
func startHolder(t *testing.T, f *inTermFixture, when string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SIMBA_IN_TERM_HOLDER="+strings.Join([]string{f.raw, f.prefix, f.table, when}, "\x1f"))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	h := &holder{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if _, err := fmt.Sscanf(h.expect("token"), "token %d", &h.token); err != nil {
		t.Fatal(err)
	}
	return h
}

// expect returns the holder's next line, failing unless it starts with
// prefix.
func (h *holder) expect(prefix string) string {
	h.t.Helper()
	if !h.out.Scan() {
		h.t.Fatalf("the holder process ended before %q: %v", prefix, h.out.Err())
	}
	line := h.out.Text()
	if !strings.HasPrefix(line, prefix) {
		h.t.Fatalf("the holder process said %q, want %q", line, prefix)
	}
	return line
}

func (h *holder) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		h.t.Fatal(err)
	}
}

func (h *holder) wait() {
	h.t.Helper()
	_ = h.in.Close()
	if err := h.cmd.Wait(); err != nil {
		h.t.Errorf("the holder process: %v", err)
	}
}

// runInTermHolder is the holder process: it takes the lock "job", prints
// its token, and runs a transaction in its term that records "holder",
// stopping where the parent said; then it prints whether InTerm's error
// matches simba.ErrTermExpired.
func runInTermHolder(spec string) int {
	parts := strings.Split(spec, "\x1f")
	if len(parts) != 4 {
		fmt.Fprintln(os.Stderr, "holder: bad spec")
		return 2
	}
	raw, prefix, table, when := parts[0], parts[1], parts[2], parts[3]
	ctx := context.Background()
	b, err := Open(ctx, raw, Options{TablePrefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: inTermLease}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	defer c.Close(ctx)
	lt, err := c.Lock("job").Acquire(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	pool, err := pgxpool.New(ctx, raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	defer pool.Close()
	in := bufio.NewScanner(os.Stdin)
	fmt.Printf("token %d\n", lt.Token())
	if when == "before" {
		in.Scan()
	}
	err = InTermTx(ctx, pool, lt.Term, TermTx{TablePrefix: prefix}, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (writer, token) VALUES ('holder', $1)", int64(lt.Token())); err != nil {
			return err
		}
		if when == "inside" {
			fmt.Println("in transaction")
			in.Scan()
		}
		return nil
	})
	fmt.Printf("result: %v; term expired: %t\n", err, errors.Is(err, simba.ErrTermExpired))
	return 0
}

// InTermSQL is InTermTx over database/sql (the pgx stdlib driver): the
// same bounds, check and commit.
func TestInTermSQL(t *testing.T) {
	f := newInTermFixture(t)
	db, err := sql.Open("pgx", f.raw)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := f.client()
	lt, err := c.Lock("sql").Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	opts := TermSQLTx{TablePrefix: f.prefix}
	err = InTermSQL(t.Context(), db, lt.Term, opts, func(ctx context.Context, tx *sql.Tx) error {
		var bound string
		if err := tx.QueryRowContext(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&bound); err != nil {
			return err
		}
		if bound == "0" {
			return fmt.Errorf("idle_in_transaction_session_timeout is %s in the transaction, want the term's remaining time", bound)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO "+f.table+" (writer, token) VALUES ('sql', $1)", int64(lt.Token()))
		return err
	})
	if err != nil {
		t.Fatalf("InTermSQL of a held term: %v", err)
	}
	if _, err := f.pool.Exec(t.Context(), "UPDATE "+f.prefix+"lease SET token = token + 1 WHERE name = 'sql'"); err != nil {
		t.Fatal(err)
	}
	err = InTermSQL(t.Context(), db, lt.Term, opts, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO "+f.table+" (writer, token) VALUES ('stale', $1)", int64(lt.Token()))
		return err
	})
	if !errors.Is(err, simba.ErrTermExpired) {
		t.Fatalf("InTermSQL after the lease row changed = %v, want an error matching simba.ErrTermExpired", err)
	}
	if err := InTermSQL(t.Context(), nil, lt.Term, opts, nil); !errors.Is(err, simba.ErrInvalidArgument) {
		t.Fatalf("InTermSQL with a nil handle = %v, want an error matching simba.ErrInvalidArgument", err)
	}
	f.wantRows("sql")
}
