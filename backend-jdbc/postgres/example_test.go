package simbapg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql, for the Fence example

	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simba "github.com/simba-go/simba/core"
)

// A Simba client on PostgreSQL holding a lock around one step. Open owns
// the connection pool; closing the backend closes it.
func Example() {
	ctx := context.Background()
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	backend, err := simbapg.Open(openCtx, "postgres://app@db.internal:5432/app?sslmode=verify-full",
		simbapg.Options{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	client, err := simba.New(backend)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	term, err := client.Lock("nightly-report").Acquire(lockCtx)
	if err != nil {
		log.Fatal(err)
	}
	defer term.Close()
	fmt.Println("holding the lock with fencing token", term.Token())
}

// Open with the password from Options, so that it is not written in the
// URL. Open returns once the server has answered and the tables are
// there, or fails when ctx ends first.
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	backend, err := simbapg.Open(ctx, "postgres://app@db.internal:5432/app?sslmode=verify-full",
		simbapg.Options{Password: os.Getenv("DB_PASSWORD"), TablePrefix: "billing_simba_"})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
}

// Open's errors tell a configuration mistake from a server that is down
// or slow.
func ExampleOpen_unreachable() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := simbapg.Open(ctx, "postgres://app@127.0.0.1:1/app", simbapg.Options{})
	switch {
	case errors.Is(err, simbapg.ErrInvalidOptions):
		fmt.Println("fix the URL or the options")
	case errors.Is(err, simbapg.ErrSchemaMissing):
		fmt.Println("apply simbapg.Schema, or set Options.Migrate")
	case err != nil:
		fmt.Println("the server did not answer: retry later")
	}
	// Output: the server did not answer: retry later
}

// New uses a pool the application already has; the application keeps it
// and closes it after the backend.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	backend, err := simbapg.New(pool, simbapg.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	// The SPI can be called directly; simba.New does this for you.
	s, err := backend.OpenSession(ctx, 15*time.Second)
	if err != nil {
		log.Fatal(err) // a *simbapg.MissingTableError if the schema was never applied
	}
	r, err := backend.Acquire(ctx, s.ID, "report-job")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("won:", r.Won, "token:", r.Token)
}

// Schema prints the migration for a DBA to review and apply: its numbered
// steps, which bring tables of any earlier version up to date.
func ExampleSchema() {
	script, err := simbapg.Schema("simba_")
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, "-- Migration") || strings.HasPrefix(line, "CREATE") || strings.HasPrefix(line, "ALTER") {
			fmt.Println(line)
		}
	}
	// Output:
	// -- Migration 1: tables.
	// CREATE TABLE IF NOT EXISTS simba_session (
	// CREATE INDEX IF NOT EXISTS simba_session_exp ON simba_session (expires_at);
	// CREATE TABLE IF NOT EXISTS simba_lease (
	// CREATE INDEX IF NOT EXISTS simba_lease_sid ON simba_lease (session_id);
	// CREATE TABLE IF NOT EXISTS simba_group_member (
	// CREATE INDEX IF NOT EXISTS simba_member_sid ON simba_group_member (session_id);
	// -- Migration 2: session identity. Adds simba_session.identity.
	// ALTER TABLE simba_session ADD COLUMN IF NOT EXISTS identity varchar(256) NOT NULL DEFAULT '';
	// -- Migration 3: session lease generation. Adds simba_session.lease_gen.
	// ALTER TABLE simba_session ADD COLUMN IF NOT EXISTS lease_gen bigint NOT NULL DEFAULT 0;
	// -- Migration 4: lease floor. Creates simba_lease_floor.
	// CREATE TABLE IF NOT EXISTS simba_lease_floor (
	// -- Migration 5: semaphores. Creates simba_semaphore.
	// CREATE TABLE IF NOT EXISTS simba_semaphore (
	// -- Migration 6: lease watch. Adds simba_lease.watched.
	// ALTER TABLE simba_lease ADD COLUMN IF NOT EXISTS watched boolean NOT NULL DEFAULT false;
}

// Any node can ask who holds a lease: the identity its holder's client
// was given (simba.WithIdentity, "host:pid" by default), the token of the
// term and when the term began, by the database clock.
func ExampleBackend_Holder() {
	ctx := context.Background()
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	backend, err := simbapg.Open(openCtx, os.Getenv("DATABASE_URL"), simbapg.Options{Migrate: true})
	if err != nil {
		log.Fatal(err) // an *OutdatedSchemaError on tables of an earlier version, without Migrate
	}
	defer backend.Close()
	client, err := simba.New(backend, simba.WithIdentity("report-worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	h, ok, err := client.Holder(ctx, "nightly-report")
	switch {
	case err != nil:
		log.Fatal(err)
	case !ok:
		fmt.Println("nobody holds the lock")
	default:
		fmt.Printf("held by %s since %v, token %d\n", h.Identity, h.Since, h.Token)
	}
}

// A fence on a table of the application: writes carry the token of the
// writer's term, and a write of an older term changes nothing.
func ExampleFence() {
	// Once, at start-up: the fence of the ledger_state table.
	fence, err := simbapg.NewFence(simbapg.FenceTable{
		Table:   "ledger_state",
		Key:     "id",
		Token:   "fencing_token",
		Columns: []string{"last_batch"},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := fence.Init(ctx, db, 1); err != nil {
		log.Fatal(err)
	}

	// In the leader's work, with the token of its term.
	var token uint64 = 8 // term.Token()
	ok, err := fence.Write(ctx, db, 1, token, "batch-42")
	switch {
	case err != nil:
		log.Printf("outcome unknown, retry with the same token: %v", err)
	case !ok:
		log.Print("a newer term has written: this node is no longer the leader")
	}
}

// A job that moves money while it holds a lock, in a transaction that
// commits only if the lock's term still holds the lease: a holder that was
// paused and lost the lock meanwhile writes nothing. The pool is the
// application's own; the tables need no token column.
func ExampleInTerm() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	backend, err := simbapg.New(pool, simbapg.Options{})
	if err != nil {
		log.Fatal(err)
	}
	client, err := simba.New(backend)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	lt, err := client.Lock("payouts").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = lt.Release(ctx) }()
	err = simbapg.InTerm(ctx, pool, lt.Term, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE account SET balance = balance - 100 WHERE id = 1")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE account SET balance = balance + 100 WHERE id = 2")
		return err
	})
	if errors.Is(err, simba.ErrTermExpired) {
		log.Print("the lock was lost: nothing was written")
	}
}
