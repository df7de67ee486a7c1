package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	simbapg "github.com/simba-go/simba/backend-jdbc/postgres"
	simba "github.com/simba-go/simba/core"
)

// tablesGoneScheme opens the in-process store of memory://NAME through a
// backend that refuses every session as a SQL backend does once its
// tables were dropped after Open.
const tablesGoneScheme = "tablesgone"

type tablesGone struct{ simba.OpenedBackend }

func (tablesGone) OpenSession(context.Context, time.Duration) (simba.SessionGrant, error) {
	return simba.SessionGrant{}, fmt.Errorf("simbapg: open session: table simba_session missing: %w", simbapg.ErrSchemaMissing)
}

func init() {
	simba.RegisterBackend(tablesGoneScheme, func(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
		b, err := openBackend(ctx, "memory://"+strings.TrimPrefix(rawURL, tablesGoneScheme+"://"), backendOptions{})
		if err != nil {
			return nil, err
		}
		return tablesGone{b}, nil
	})
}

// TestTablesGoneAfterOpenIsAConfigurationError: tables that vanish between
// Open and the first session make status and lock exit with 78, saying
// so, once they give up waiting, rather than 69 with no reason.
func TestTablesGoneAfterOpenIsAConfigurationError(t *testing.T) {
	url := tablesGoneScheme + "://" + strings.TrimPrefix(memoryURL(t), "memory://")
	for _, args := range [][]string{
		{"status", "--backend", url, "--timeout", "500ms"},
		{"lock", "--backend", url, "--timeout", "500ms", "cli-gone", "--", "true"},
	} {
		r := runSimba(t, args...)
		if r.code != exitConfig || !strings.Contains(r.stderr, "table simba_session missing") {
			t.Errorf("%s: exit code %d, stderr %q; want %d and the missing table", args[0], r.code, r.stderr, exitConfig)
		}
	}
}

// TestRefusedPrivilegesIsAConfigurationError: a database user the server
// lets in but refuses the tables (no privileges on PostgreSQL, where the
// tables are found and every session open is refused; SELECT only on
// MariaDB, where the statements cannot be prepared) exits with EX_CONFIG,
// 78, saying why, not with 69 after --timeout as an unreachable backend:
// no retry grants privileges. On PostgreSQL status said only that no
// session opened.
func TestRefusedPrivilegesIsAConfigurationError(t *testing.T) {
	for _, be := range sqlBackends() {
		t.Run(be.name, func(t *testing.T) {
			admin := serverURL(t, be.variable, be.toURL)
			prefix := "simba_cli_np" + randomHex(t) + "_"
			if r := runSimba(t, "status", "--backend", admin, "--table-prefix", prefix, "--migrate", "--timeout", "5s"); r.code != exitOK {
				t.Fatalf("migrate: exit code %d, stderr %q", r.code, r.stderr)
			}
			user, password := "simba_cli_np"+randomHex(t), "pw"+randomHex(t)
			var restricted string
			if be.name == "postgres" {
				restricted = pgRestrictedUser(t, admin, prefix, user, password)
			} else {
				restricted = mysqlRestrictedUser(t, admin, prefix, user, password)
			}
			for _, args := range [][]string{
				{"status", "--backend", restricted, "--table-prefix", prefix, "--timeout", "3s"},
				{"lock", "--backend", restricted, "--table-prefix", prefix, "--timeout", "3s", "cli-np", "--", "true"},
			} {
				r := runSimba(t, args...)
				t.Logf("%s: %s", args[0], r.stderr)
				if r.code != exitConfig || !strings.Contains(r.stderr, "denied") || !strings.Contains(r.stderr, "GRANT") {
					t.Errorf("%s: exit code %d, stderr %q; want %d saying that the server denied the user, and to grant", args[0], r.code, r.stderr, exitConfig)
				}
				if strings.Contains(r.stderr, password) {
					t.Errorf("%s: stderr shows the password: %q", args[0], r.stderr)
				}
			}
		})
	}
}

// pgRestrictedUser creates a PostgreSQL role that may log in but has no
// privilege on the tables of prefix, dropped with the tables when the
// test ends, and returns the URL of adminURL for it.
func pgRestrictedUser(t *testing.T, adminURL, prefix, user, password string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE ROLE "+user+" LOGIN PASSWORD '"+password+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for _, q := range []string{
			"DROP TABLE IF EXISTS " + prefix + "session, " + prefix + "lease, " + prefix + "group_member, " + prefix + "lease_floor CASCADE",
			"DROP ROLE IF EXISTS " + user,
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Error(err)
			}
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// mysqlRestrictedUser creates a MySQL or MariaDB user that may read the
// database but not write, dropped with the tables of prefix when the
// test ends, and returns the URL of adminURL for it.
func mysqlRestrictedUser(t *testing.T, adminURL, prefix, user, password string) string {
	t.Helper()
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + password + "'",
		"GRANT SELECT ON `" + cfg.DBName + "`.* TO '" + user + "'@'%'",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, q := range []string{
			"DROP TABLE IF EXISTS " + prefix + "session, " + prefix + "lease, " + prefix + "group_member, " + prefix + "lease_floor",
			"DROP USER IF EXISTS '" + user + "'@'%'",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Error(err)
			}
		}
	})
	u.User = url.UserPassword(user, password)
	return u.String()
}
