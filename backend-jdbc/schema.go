package simbasql

import (
	"fmt"
	"regexp"
	"strings"
)

// Dialect names the SQL flavour of a database.
type Dialect string

const (
	// Postgres is PostgreSQL 14 or later.
	Postgres Dialect = "postgres"
	// MySQL is MySQL 8 or MariaDB 10.11 or later, with InnoDB tables.
	MySQL Dialect = "mysql"
)

// DefaultTablePrefix is the table prefix used when Options.TablePrefix is
// empty: the tables are simba_session, simba_lease and simba_group_member.
const DefaultTablePrefix = "simba_"

var prefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

// validatePrefix checks a table prefix; it is the only text ever spliced
// into SQL, so anything but a plain identifier is refused.
func validatePrefix(prefix string) error {
	if !prefixPattern.MatchString(prefix) {
		return &OptionsError{Field: "TablePrefix", Reason: fmt.Sprintf(
			"%q must match ^[A-Za-z_][A-Za-z0-9_]{0,40}$", prefix)}
	}
	return nil
}

// tables holds the three table names for one prefix.
type tables struct {
	session, lease, member string
}

func newTables(prefix string) tables {
	return tables{session: prefix + "session", lease: prefix + "lease", member: prefix + "group_member"}
}

func (t tables) all() []string { return []string{t.session, t.lease, t.member} }

// expand replaces {session}, {lease}, {member} and {p} (the prefix, for
// index names) in a statement template.
func (t tables) expand(q string) string {
	prefix := strings.TrimSuffix(t.session, "session")
	return strings.NewReplacer(
		"{session}", t.session,
		"{lease}", t.lease,
		"{member}", t.member,
		"{p}", prefix,
	).Replace(q)
}

// The DDL keeps index names short so that a 41-character prefix stays
// within the identifier limits (63 bytes on PostgreSQL, 64 on MySQL).
var postgresDDL = []string{
	`CREATE TABLE IF NOT EXISTS {session} (
    id         varchar(32) COLLATE "C" PRIMARY KEY,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)`,
	`CREATE INDEX IF NOT EXISTS {p}session_exp ON {session} (expires_at)`,
	`CREATE TABLE IF NOT EXISTS {lease} (
    name        varchar(128) COLLATE "C" PRIMARY KEY,
    session_id  varchar(32) COLLATE "C",
    token       bigint NOT NULL CHECK (token > 0),
    acquired_at timestamptz NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS {p}lease_sid ON {lease} (session_id)`,
	`CREATE TABLE IF NOT EXISTS {member} (
    group_name varchar(128) COLLATE "C" NOT NULL,
    session_id varchar(32) COLLATE "C" NOT NULL,
    joined_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, session_id)
)`,
	`CREATE INDEX IF NOT EXISTS {p}member_sid ON {member} (session_id)`,
}

// MySQL 8 has no CREATE INDEX IF NOT EXISTS, so the indexes are declared
// inline. Names and ids are ascii_bin: byte-wise, case-sensitive equality.
// Times are DATETIME(6) holding UTC, written and compared with
// UTC_TIMESTAMP(6) only, so the session time_zone never matters.
var mysqlDDL = []string{
	`CREATE TABLE IF NOT EXISTS {session} (
    id         CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    expires_at DATETIME(6) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    PRIMARY KEY (id),
    KEY {p}session_exp (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS {lease} (
    name        VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id  CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL,
    token       BIGINT NOT NULL,
    acquired_at DATETIME(6) NOT NULL,
    PRIMARY KEY (name),
    KEY {p}lease_sid (session_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS {member} (
    group_name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    session_id CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    joined_at  DATETIME(6) NOT NULL,
    PRIMARY KEY (group_name, session_id),
    KEY {p}member_sid (session_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
}

// ddl returns the migration statements of dialect for prefix.
func ddl(dialect Dialect, prefix string) ([]string, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	var src []string
	switch dialect {
	case Postgres:
		src = postgresDDL
	case MySQL:
		src = mysqlDDL
	default:
		return nil, &OptionsError{Field: "Dialect", Reason: fmt.Sprintf("%q is not %q or %q", dialect, Postgres, MySQL)}
	}
	t := newTables(prefix)
	out := make([]string, len(src))
	for i, q := range src {
		out[i] = t.expand(q)
	}
	return out, nil
}

// Schema returns the SQL script that creates the tables of dialect with
// table prefix prefix (DefaultTablePrefix when empty), for a DBA to review
// and apply by hand. It is the same idempotent script Options.Migrate runs:
// every statement is CREATE ... IF NOT EXISTS, so applying it twice is
// harmless. It fails with an *OptionsError for an unknown dialect or a
// prefix that is not an identifier of at most 41 characters.
func Schema(dialect Dialect, prefix string) (string, error) {
	if prefix == "" {
		prefix = DefaultTablePrefix
	}
	stmts, err := ddl(dialect, prefix)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- Simba tables for %s, prefix %q. Idempotent: safe to apply again.\n", dialect, prefix)
	b.WriteString("-- Lease rows are never deleted: their token must never go back.\n\n")
	for _, s := range stmts {
		b.WriteString(s)
		b.WriteString(";\n\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
