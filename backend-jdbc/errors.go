package simbasql

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrClosed is returned by every method of a Backend after Close.
	ErrClosed = errors.New("simbasql: backend closed")

	// ErrSchemaMissing is matched (with errors.Is) by every
	// *MissingTableError.
	ErrSchemaMissing = errors.New("simbasql: schema missing")

	// ErrInvalidOptions is matched (with errors.Is) by every *OptionsError.
	ErrInvalidOptions = errors.New("simbasql: invalid options")
)

// MissingTableError reports that tables the backend needs do not exist,
// which happens when Options.Migrate is off and the schema was never applied
// (or was applied with another table prefix).
type MissingTableError struct {
	Tables []string // the missing tables, prefix included
	Err    error    // the driver's error, when one revealed the problem
}

func (e *MissingTableError) Error() string {
	noun := "table"
	if len(e.Tables) > 1 {
		noun = "tables"
	}
	name := strings.Join(e.Tables, ", ")
	if name == "" {
		name = "(unknown)"
	}
	return fmt.Sprintf("simbasql: %s %s missing: run the migration (Options.Migrate) or apply simbasql.Schema", noun, name)
}

// Is makes errors.Is(err, ErrSchemaMissing) true.
func (e *MissingTableError) Is(target error) bool { return target == ErrSchemaMissing }

// Unwrap returns the driver's error, if any.
func (e *MissingTableError) Unwrap() error { return e.Err }

// OptionsError reports an Options field, URL or dialect that cannot be used.
type OptionsError struct {
	Field  string // e.g. "TablePrefix"
	Reason string // the value and what is wrong with it
}

func (e *OptionsError) Error() string { return "simbasql: " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidOptions) true.
func (e *OptionsError) Is(target error) bool { return target == ErrInvalidOptions }

// wrap turns a driver error of operation op into this package's error: a
// *MissingTableError when a table is missing (and the schema check is then
// repeated on the next call), otherwise the driver error wrapped with %w.
func (b *Backend) wrap(op string, err error) error {
	if tables := b.missingTables(err); tables != nil {
		b.schemaOK.Store(false)
		return &MissingTableError{Tables: tables, Err: err}
	}
	return fmt.Errorf("simbasql: %s: %w", op, err)
}

// missingTables returns the tables of this backend that err says do not
// exist, nil when err is about something else.
func (b *Backend) missingTables(err error) []string {
	var msg string
	var pgErr *pgconn.PgError
	var myErr *mysql.MySQLError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		msg = pgErr.Message
	case errors.As(err, &myErr) && myErr.Number == 1146: // ER_NO_SUCH_TABLE
		msg = myErr.Message
	default:
		return nil
	}
	// Quote-delimited in both servers' messages: "simba_lease" on
	// PostgreSQL (folded to lower case), 'db.simba_lease' on MySQL.
	msg = strings.ToLower(msg)
	var found []string
	for _, t := range b.tables.all() {
		t = strings.ToLower(t)
		if strings.Contains(msg, `"`+t+`"`) || strings.Contains(msg, "."+t+"'") || strings.Contains(msg, "'"+t+"'") {
			found = append(found, t)
		}
	}
	if found == nil {
		found = []string{}
	}
	return found
}
