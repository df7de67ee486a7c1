package simbamysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver of database/sql

	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
	simba "github.com/simba-go/simba/core"
)

// A Simba client on MySQL or MariaDB holding a lock around one step. Open
// owns the *sql.DB; closing the backend closes it.
func Example() {
	ctx := context.Background()
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	backend, err := simbamysql.Open(openCtx, "mysql://app@db.internal:3306/app?tls=true",
		simbamysql.Options{Password: os.Getenv("DB_PASSWORD"), Migrate: true})
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

// Open with a mysql:// URL; the password comes from Options so it is not
// written in the URL. Open returns once the server has answered and the
// tables are there, or fails when ctx ends first.
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	backend, err := simbamysql.Open(ctx, "mysql://app@db.internal:3306/app?tls=true",
		simbamysql.Options{Password: os.Getenv("DB_PASSWORD"), TablePrefix: "billing_simba_"})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
}

// Open takes a go-sql-driver/mysql DSN as well.
func ExampleOpen_dsn() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	backend, err := simbamysql.Open(ctx, "app@tcp(db.internal:3306)/app?tls=true&readTimeout=10s",
		simbamysql.Options{Password: os.Getenv("DB_PASSWORD")})
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
	_, err := simbamysql.Open(ctx, "mysql://app@127.0.0.1:1/app", simbamysql.Options{})
	switch {
	case errors.Is(err, simbamysql.ErrInvalidOptions):
		fmt.Println("fix the URL or the options")
	case errors.Is(err, simbamysql.ErrSchemaMissing):
		fmt.Println("apply simbamysql.Schema, or set Options.Migrate")
	case err != nil:
		fmt.Println("the server did not answer: retry later")
	}
	// Output: the server did not answer: retry later
}

// New uses a *sql.DB of go-sql-driver/mysql that the application owns.
func ExampleNew() {
	db, err := sql.Open("mysql", "app:pw@tcp(db.internal:3306)/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	backend, err := simbamysql.New(db, simbamysql.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	if err := backend.Migrate(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Schema prints the migration for a DBA to review and apply: its numbered
// steps, which bring tables of any earlier version up to date.
func ExampleSchema() {
	script, err := simbamysql.Schema("simba_")
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, "-- Migration") || strings.HasPrefix(line, "CREATE") ||
			strings.HasPrefix(line, "    KEY") || strings.HasPrefix(line, "    'ALTER") {
			fmt.Println(line)
		}
	}
	// Output:
	// -- Migration 1: tables.
	// CREATE TABLE IF NOT EXISTS simba_session (
	//     KEY simba_session_exp (expires_at)
	// CREATE TABLE IF NOT EXISTS simba_lease (
	//     KEY simba_lease_sid (session_id)
	// CREATE TABLE IF NOT EXISTS simba_group_member (
	//     KEY simba_member_sid (session_id)
	// -- Migration 2: session identity. Adds simba_session.identity.
	//     'ALTER TABLE simba_session ADD COLUMN identity VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''''',
	// -- Migration 3: session lease generation. Adds simba_session.lease_gen.
	//     'ALTER TABLE simba_session ADD COLUMN lease_gen BIGINT NOT NULL DEFAULT 0',
	// -- Migration 4: lease floor. Creates simba_lease_floor.
	// CREATE TABLE IF NOT EXISTS simba_lease_floor (
	// -- Migration 5: semaphores. Creates simba_semaphore.
	// CREATE TABLE IF NOT EXISTS simba_semaphore (
}

// A fence on a table of the application: writes carry the token of the
// writer's term, and a write of an older term changes nothing.
func ExampleFence() {
	fence, err := simbamysql.NewFence(simbamysql.FenceTable{
		Table:   "ledger_state",
		Key:     "id",
		Token:   "fencing_token",
		Columns: []string{"last_batch"},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("DATABASE_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := fence.Init(ctx, db, 1); err != nil {
		log.Fatal(err)
	}

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
// paused and lost the lock meanwhile writes nothing. The *sql.DB is the
// application's own; the tables need no token column.
func ExampleInTerm() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("DATABASE_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	backend, err := simbamysql.New(db, simbamysql.Options{})
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
	err = simbamysql.InTerm(ctx, db, lt.Term, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE account SET balance = balance - 100 WHERE id = 1")
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE account SET balance = balance + 100 WHERE id = 2")
		return err
	})
	if errors.Is(err, simba.ErrTermExpired) {
		log.Print("the lock was lost: nothing was written")
	}
}
