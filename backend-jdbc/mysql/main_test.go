package simbamysql

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
	"github.com/simba-go/simba/core/backendtest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("SIMBA_IN_TERM_HOLDER"); spec != "" {
		os.Exit(runInTermHolder(spec)) // a holder process of in_term_test.go
	}
	goleak.VerifyTestMain(m)
}

// withIsolation returns raw with a parameter that makes level the
// isolation of every connection's transactions, and checks that it does:
// transaction_isolation on MySQL 8 and MariaDB 11.1+, tx_isolation on
// earlier MariaDB.
func withIsolation(t testing.TB, raw, level string) string {
	t.Helper()
	for _, name := range []string{"transaction_isolation", "tx_isolation"} {
		cfg := parseDSN(t, raw)
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[name] = "'" + level + "'"
		dsn := cfg.FormatDSN()
		db := newDB(t, dsn, 1)
		var got string
		if err := db.QueryRowContext(t.Context(), "SELECT @@"+name).Scan(&got); err != nil {
			continue // unknown on this server: try the other name
		}
		if got != level {
			t.Fatalf("%s = %q on a connection of the DSN, want %q", name, got, level)
		}
		return dsn
	}
	t.Fatal("the server takes neither transaction_isolation nor tx_isolation")
	return ""
}

func parseDSN(t testing.TB, raw string) *mysql.Config {
	t.Helper()
	cfg, err := mysql.ParseDSN(raw)
	if err != nil {
		t.Fatalf("SIMBA_TEST_MYSQL_URL: %v", err)
	}
	return cfg
}

// newDB returns a client of raw, closed when t ends.
func newDB(t testing.TB, raw string, maxConns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", raw)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestMigrateIgnoresDuplicateColumn: an ALTER TABLE that a concurrent
// migration made redundant, between the check of information_schema and
// the EXECUTE, fails with ER_DUP_FIELDNAME, which is what the step wanted.
func TestMigrateIgnoresDuplicateColumn(t *testing.T) {
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL")
	db := newDB(t, raw, 0)
	table := "t_dupcol_" + fmt.Sprint(time.Now().UnixNano())
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+table+" (id INT, identity VARCHAR(256) NOT NULL DEFAULT '')"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
	d := newDialect(db, sqlcore.NewTables("unused_"))
	alter := "ALTER TABLE " + table + " ADD COLUMN identity VARCHAR(256) NOT NULL DEFAULT ''"
	if err := d.Migrate(t.Context(), []string{alter}); err != nil {
		t.Fatalf("Migrate with a column that exists: %v", err)
	}
	if err := d.Migrate(t.Context(), []string{"ALTER TABLE " + table + " ADD COLUMN bad TYPO"}); err == nil {
		t.Fatal("Migrate ignored another error")
	}
}
