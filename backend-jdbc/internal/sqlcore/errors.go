package sqlcore

import (
	"errors"
	"fmt"
	"strings"

	simba "github.com/simba-go/simba/core"
)

// Pkg is the public package a backend belongs to: the name its errors and
// log lines start with, and its sentinel errors, which the errors of this
// package match.
type Pkg struct {
	Name string // e.g. "simbapg"

	ErrClosed          error
	ErrSchemaMissing   error
	ErrInvalidOptions  error
	ErrInvalidFence    error
	ErrFenceRowMissing error
}

// NewPkg returns the sentinels of the package name.
func NewPkg(name string) *Pkg {
	return &Pkg{
		Name:               name,
		ErrClosed:          errors.New(name + ": backend closed"),
		ErrSchemaMissing:   errors.New(name + ": schema missing"),
		ErrInvalidOptions:  errors.New(name + ": invalid options"),
		ErrInvalidFence:    errors.New(name + ": invalid fence"),
		ErrFenceRowMissing: errors.New(name + ": fence row missing"),
	}
}

func (p *Pkg) name() string {
	if p == nil {
		return "sql"
	}
	return p.Name
}

// Errorf formats an error whose message starts with the package name.
func (p *Pkg) Errorf(format string, args ...any) error {
	return fmt.Errorf(p.name()+": "+format, args...)
}

// OptionsError returns an *OptionsError of the package.
func (p *Pkg) OptionsError(field, reason string) *OptionsError {
	return &OptionsError{Field: field, Reason: reason, pkg: p}
}

// OptionsError reports an Options field, URL or client that cannot be used.
type OptionsError struct {
	Field  string // e.g. "TablePrefix", "url"
	Reason string // the value and what is wrong with it

	pkg *Pkg
}

func (e *OptionsError) Error() string { return e.pkg.name() + ": " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidOptions) true for the package's
// sentinel, and errors.Is(err, simba.ErrInvalidURL) true for an error
// about the URL or DSN itself, as simba.OpenBackend's callers expect.
func (e *OptionsError) Is(target error) bool {
	if target == simba.ErrInvalidURL {
		return e.Field == "url" || e.Field == "dsn"
	}
	return e.pkg != nil && target == e.pkg.ErrInvalidOptions
}

// MissingTableError reports that tables the backend needs do not exist.
type MissingTableError struct {
	Tables []string // the missing tables, prefix included
	Err    error    // the driver's error, when one revealed the problem

	pkg *Pkg
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
	return fmt.Sprintf("%s: %s %s missing: run the migration (Options.Migrate) or apply %s.Schema",
		e.pkg.name(), noun, name, e.pkg.name())
}

// Is makes errors.Is(err, ErrSchemaMissing) true for the package's sentinel.
func (e *MissingTableError) Is(target error) bool {
	return e.pkg != nil && target == e.pkg.ErrSchemaMissing
}

// Unwrap returns the driver's error, if any.
func (e *MissingTableError) Unwrap() error { return e.Err }

// OutdatedSchemaError reports tables made by an earlier version: they
// exist but lack the columns or the tables of a later migration step.
type OutdatedSchemaError struct {
	Migration int      // the first step the tables lack
	Name      string   // what that step does
	Columns   []string // the missing columns, as table.column
	Tables    []string // the missing tables of later steps
	Err       error    // the driver's error, when one revealed the problem

	pkg *Pkg
}

func (e *OutdatedSchemaError) Error() string {
	var what []string
	for _, part := range []struct {
		noun  string
		names []string
	}{{"column", e.Columns}, {"table", e.Tables}} {
		switch len(part.names) {
		case 0:
		case 1:
			what = append(what, part.noun+" "+part.names[0])
		default:
			what = append(what, part.noun+"s "+strings.Join(part.names, ", "))
		}
	}
	if len(what) == 0 {
		what = []string{"column (unknown)"}
	}
	return fmt.Sprintf("%s: tables predate migration %d (%s): %s missing: run the migration (Options.Migrate or Backend.Migrate) or apply %s.Schema",
		e.pkg.name(), e.Migration, e.Name, strings.Join(what, " and "), e.pkg.name())
}

// Is makes errors.Is(err, ErrSchemaMissing) true for the package's
// sentinel: the schema the backend needs is not there yet.
func (e *OutdatedSchemaError) Is(target error) bool {
	return e.pkg != nil && target == e.pkg.ErrSchemaMissing
}

// Unwrap returns the driver's error, if any.
func (e *OutdatedSchemaError) Unwrap() error { return e.Err }
