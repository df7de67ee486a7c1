package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// FenceTable names a table whose rows are fenced resources.
type FenceTable struct {
	Table   string
	Key     string
	Token   string
	Columns []string
}

// Fence holds the statements of fenced writes to the rows of one table.
type Fence struct {
	pkg      *Pkg
	postgres bool   // $n placeholders and "quotes"; else ? and `backquotes`
	table    string // as given, for messages
	columns  int
	Update   string // SET columns, token WHERE key AND token <= write's
	Current  string // the row's token, locked
	Insert   string // the row with token 0 unless it exists
}

var fenceIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// NewFence checks t and builds the statements of its fence, for PostgreSQL
// when postgres is set and for MySQL otherwise.
func (p *Pkg) NewFence(postgres bool, t FenceTable) (*Fence, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", p.ErrInvalidFence, fmt.Sprintf(format, args...))
	}
	schema, table, qualified := strings.Cut(t.Table, ".")
	if !qualified {
		schema, table = "", t.Table
	}
	type named struct{ field, name string }
	names := []named{{"Table", table}, {"Key", t.Key}, {"Token", t.Token}}
	if qualified {
		names = append(names, named{"Table", schema})
	}
	for i, c := range t.Columns {
		names = append(names, named{fmt.Sprintf("Columns[%d]", i), c})
	}
	seen := make(map[string]string)
	for _, n := range names {
		if !fenceIdent.MatchString(n.name) {
			return nil, bad("%s %q is not a plain identifier (^[A-Za-z_][A-Za-z0-9_]{0,62}$)", n.field, n.name)
		}
		if n.field == "Table" {
			continue
		}
		// MySQL column names are case-insensitive, so compare folded.
		if prev, dup := seen[strings.ToLower(n.name)]; dup {
			return nil, bad("%s %q is also %s", n.field, n.name, prev)
		}
		seen[strings.ToLower(n.name)] = n.field
	}

	q := func(name string) string {
		if postgres {
			return `"` + name + `"`
		}
		return "`" + name + "`"
	}
	qt := q(table)
	if qualified {
		qt = q(schema) + "." + qt
	}
	key, token := q(t.Key), q(t.Token)
	f := &Fence{pkg: p, postgres: postgres, table: t.Table, columns: len(t.Columns)}
	var set strings.Builder
	if postgres {
		// $1..$n the values, $n+1 the token, $n+2 the key.
		n := len(t.Columns)
		for i, c := range t.Columns {
			fmt.Fprintf(&set, "%s = $%d, ", q(c), i+1)
		}
		f.Update = fmt.Sprintf("UPDATE %s SET %s%s = $%d WHERE %s = $%d AND %s <= $%d",
			qt, set.String(), token, n+1, key, n+2, token, n+1)
		f.Current = fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 FOR UPDATE", token, qt, key)
		f.Insert = fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES ($1, 0) ON CONFLICT DO NOTHING", qt, key, token)
		return f, nil
	}
	// The values, the token, the key, the token again.
	for _, c := range t.Columns {
		fmt.Fprintf(&set, "%s = ?, ", q(c))
	}
	f.Update = fmt.Sprintf("UPDATE %s SET %s%s = ? WHERE %s = ? AND %s <= ?", qt, set.String(), token, key, token)
	f.Current = fmt.Sprintf("SELECT %s FROM %s WHERE %s = ? FOR UPDATE", token, qt, key)
	f.Insert = fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES (?, 0) ON DUPLICATE KEY UPDATE %s = %s", qt, key, token, key, key)
	return f, nil
}

// Runner runs a fence's statements on one kind of handle.
type Runner interface {
	// Exec returns the number of rows the statement matched or changed.
	Exec(ctx context.Context, q string, args ...any) (int64, error)
	// Token reads one BIGINT; found is false when there is no row.
	Token(ctx context.Context, q string, args ...any) (v int64, found bool, err error)
}

// SQLHandle is what a fence needs from a database/sql handle; the public
// packages name it with an alias, so that it is one type in both.
type SQLHandle interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SQLRunner runs a fence's statements on a database/sql handle.
type SQLRunner struct{ DB SQLHandle }

// Exec runs q and returns the rows it affected.
func (s SQLRunner) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.DB.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Token reads one BIGINT.
func (s SQLRunner) Token(ctx context.Context, q string, args ...any) (int64, bool, error) {
	var v int64
	err := s.DB.QueryRowContext(ctx, q, args...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// NilHandle is the error of a fence call with a nil handle.
func (f *Fence) NilHandle() error {
	return fmt.Errorf("%w: nil database handle", f.pkg.ErrInvalidFence)
}

// Init creates the row of key with token 0 unless it exists.
func (f *Fence) Init(ctx context.Context, r Runner, key any) error {
	if _, err := r.Exec(ctx, f.Insert, key); err != nil {
		return f.pkg.Errorf("fence %s: create row: %w", f.table, err)
	}
	return nil
}

// Write sets the columns to values and the token column to token in the
// row of key if the row's token is at most token, and reports whether it
// did.
func (f *Fence) Write(ctx context.Context, r Runner, key any, token uint64, values []any) (bool, error) {
	if token > math.MaxInt64 {
		return false, fmt.Errorf("%w: token %d does not fit a BIGINT", f.pkg.ErrInvalidFence, token)
	}
	if len(values) != f.columns {
		return false, fmt.Errorf("%w: %d values for %d columns", f.pkg.ErrInvalidFence, len(values), f.columns)
	}
	tok := int64(token)
	args := make([]any, 0, len(values)+3)
	args = append(args, values...)
	if f.postgres {
		args = append(args, tok, key)
	} else {
		args = append(args, tok, key, tok)
	}
	n, err := r.Exec(ctx, f.Update, args...)
	switch {
	case err != nil:
		return false, f.pkg.Errorf("fence %s: write: %w", f.table, err)
	case n == 1:
		return true, nil
	case n > 1:
		return false, f.pkg.Errorf("fence %s: write matched %d rows: the key column must be unique", f.table, n)
	}
	current, found, err := r.Token(ctx, f.Current, key)
	switch {
	case err != nil:
		return false, f.pkg.Errorf("fence %s: read token: %w", f.table, err)
	case !found:
		return false, fmt.Errorf("%w: table %s, key %v", f.pkg.ErrFenceRowMissing, f.table, key)
	case current == tok:
		return true, nil // an unchanged retry, as MySQL reports it
	case current > tok:
		return false, nil // stale
	}
	// Lower than a token the update did not accept: something wrote the
	// row without a fence in between.
	return false, f.pkg.Errorf("fence %s: token of key %v went down to %d during the write", f.table, key, current)
}
