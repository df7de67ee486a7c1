package simbasql_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	simbasql "github.com/simba-go/simba/backend-jdbc"
	simba "github.com/simba-go/simba/core"
)

// A Simba client on PostgreSQL holding a lock around one step. Open owns
// the connection pool; closing the backend closes it.
func Example() {
	ctx := context.Background()
	backend, err := simbasql.Open(ctx, "postgres://app@db.internal:5432/app?sslmode=verify-full",
		simbasql.Options{Migrate: true})
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
// written in the URL.
func ExampleOpen() {
	ctx := context.Background()
	backend, err := simbasql.Open(ctx, "mysql://app@db.internal:3306/app?tls=true",
		simbasql.Options{Password: "from-a-secret-store", TablePrefix: "billing_simba_"})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	fmt.Println(backend.Dialect())
}

// NewPostgres uses a pool the application already has; the application
// keeps it and closes it after the backend.
func ExampleNewPostgres() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	backend, err := simbasql.NewPostgres(pool, simbasql.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	// The SPI can be called directly; simba.New does this for you.
	s, err := backend.OpenSession(ctx, 15*time.Second)
	if err != nil {
		log.Fatal(err) // a *simbasql.MissingTableError if the schema was never applied
	}
	r, err := backend.Acquire(ctx, s.ID, "report-job")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("won:", r.Won, "token:", r.Token)
}

// NewMySQL uses a *sql.DB of go-sql-driver/mysql that the application owns.
func ExampleNewMySQL() {
	db, err := sql.Open("mysql", "app:pw@tcp(db.internal:3306)/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	backend, err := simbasql.NewMySQL(db, simbasql.Options{Migrate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	if err := backend.Migrate(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Schema prints the migration for a DBA to review and apply.
func ExampleSchema() {
	script, err := simbasql.Schema(simbasql.Postgres, "simba_")
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(line, "CREATE") {
			fmt.Println(line)
		}
	}
	// Output:
	// CREATE TABLE IF NOT EXISTS simba_session (
	// CREATE INDEX IF NOT EXISTS simba_session_exp ON simba_session (expires_at);
	// CREATE TABLE IF NOT EXISTS simba_lease (
	// CREATE INDEX IF NOT EXISTS simba_lease_sid ON simba_lease (session_id);
	// CREATE TABLE IF NOT EXISTS simba_group_member (
	// CREATE INDEX IF NOT EXISTS simba_member_sid ON simba_group_member (session_id);
}
