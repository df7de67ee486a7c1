package sqlcore

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
)

// DefaultTablePrefix is the prefix of the tables when none is given.
const DefaultTablePrefix = "simba_"

// DefaultCleanupInterval is how often expired sessions are deleted when
// Options.CleanupInterval is zero.
const DefaultCleanupInterval = time.Minute

// MaxLease is the longest session lease a backend accepts.
const MaxLease = 24 * time.Hour

// Options are the settings of the engine, whatever the database.
type Options struct {
	TablePrefix     string        // DefaultTablePrefix when empty
	Migrate         bool          // create missing tables on first use
	CleanupInterval time.Duration // DefaultCleanupInterval when zero; negative: no cleanup
	Logger          *slog.Logger  // nothing is logged when nil
}

// Resolve validates o and fills in its defaults.
func (p *Pkg) Resolve(o Options) (Options, error) {
	if o.TablePrefix == "" {
		o.TablePrefix = DefaultTablePrefix
	}
	if err := p.validatePrefix(o.TablePrefix); err != nil {
		return o, err
	}
	if o.CleanupInterval == 0 {
		o.CleanupInterval = DefaultCleanupInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

var prefixPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

// validatePrefix checks a table prefix; it is the only text ever spliced
// into SQL, so anything but a plain identifier is refused.
func (p *Pkg) validatePrefix(prefix string) error {
	if !prefixPattern.MatchString(prefix) {
		return p.OptionsError("TablePrefix", fmt.Sprintf("%q must match ^[A-Za-z_][A-Za-z0-9_]{0,40}$", prefix))
	}
	return nil
}

// Tables holds the table names of one prefix.
type Tables struct {
	Session, Lease, Member string
	Floor                  string // one row: the highest token a sweep removed
	Semaphore              string // a row per semaphore: its permits and highest token
}

// NewTables returns the tables of prefix.
func NewTables(prefix string) Tables {
	return Tables{Session: prefix + "session", Lease: prefix + "lease", Member: prefix + "group_member", Floor: prefix + "lease_floor",
		Semaphore: prefix + "semaphore"}
}

// All returns the names, the tables of the first migration step first.
func (t Tables) All() []string { return []string{t.Session, t.Lease, t.Member, t.Floor, t.Semaphore} }

// Expand replaces {session}, {lease}, {member}, {floor}, {semaphore} and {p} (the
// prefix, for index names) in a statement template.
func (t Tables) Expand(q string) string {
	prefix := strings.TrimSuffix(t.Session, "session")
	return strings.NewReplacer(
		"{session}", t.Session,
		"{lease}", t.Lease,
		"{member}", t.Member,
		"{floor}", t.Floor,
		"{semaphore}", t.Semaphore,
		"{p}", prefix,
	).Replace(q)
}

// Migration is one numbered step of a database's schema. Steps are
// applied in order and never changed once released: a later version of the
// tables is a new step. Every statement is idempotent, so the whole list
// can be applied to tables of any earlier version, or twice.
type Migration struct {
	Version int    // 1, 2, ...
	Name    string // what the step does, e.g. "session identity"
	// Adds are the columns the step adds to tables of earlier steps: tables
	// that lack one of them predate the step. The first step, which
	// creates the tables, has none.
	Adds []Column
	// Creates are the tables (templates, "{floor}") a later step adds
	// beside those of the first: tables of the first step without them
	// predate the step.
	Creates []string
	// Stmts are the step's statement templates (see Tables.Expand).
	Stmts []string
}

// Column names a column: Table is a template ("{session}") in a
// Migration, a table name once expanded.
type Column struct {
	Table, Name string
}

// String returns table.column.
func (c Column) String() string { return c.Table + "." + c.Name }

// DDL returns the statements of every migration step, in order, for
// prefix, which must be valid.
func (p *Pkg) DDL(steps []Migration, prefix string) ([]string, error) {
	if err := p.validatePrefix(prefix); err != nil {
		return nil, err
	}
	t := NewTables(prefix)
	var out []string
	for _, m := range steps {
		for _, q := range m.Stmts {
			out = append(out, t.Expand(q))
		}
	}
	return out, nil
}

// Script returns the migration steps for prefix (DefaultTablePrefix when
// empty) as one SQL script, with a header naming database and a comment
// before each step.
func (p *Pkg) Script(database string, steps []Migration, prefix string) (string, error) {
	if prefix == "" {
		prefix = DefaultTablePrefix
	}
	if err := p.validatePrefix(prefix); err != nil {
		return "", err
	}
	t := NewTables(prefix)
	var b strings.Builder
	fmt.Fprintf(&b, "-- Simba tables for %s, prefix %q. Idempotent: safe to apply again,\n", database, prefix)
	b.WriteString("-- and to tables made by an earlier version, which it brings up to date.\n")
	b.WriteString("-- Lease rows are deleted only by Sweep, which raises the floor: a token never goes back.\n\n")
	for _, m := range steps {
		fmt.Fprintf(&b, "-- Migration %d: %s.", m.Version, m.Name)
		if len(m.Adds) > 0 {
			cols := make([]string, len(m.Adds))
			for i, c := range m.Adds {
				cols[i] = t.Expand(c.String())
			}
			fmt.Fprintf(&b, " Adds %s.", strings.Join(cols, ", "))
		}
		if len(m.Creates) > 0 {
			fmt.Fprintf(&b, " Creates %s.", t.Expand(strings.Join(m.Creates, ", ")))
		}
		b.WriteString("\n\n")
		for _, q := range m.Stmts {
			b.WriteString(t.Expand(q))
			b.WriteString(";\n\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// lateTables returns the tables that steps after the first create,
// expanded for t, with the step creating each.
func lateTables(steps []Migration, t Tables) map[string]*Migration {
	late := map[string]*Migration{}
	for i := range steps {
		for _, tbl := range steps[i].Creates {
			late[t.Expand(tbl)] = &steps[i]
		}
	}
	return late
}

// columns returns the columns that the steps add, expanded for t, with the
// step adding each.
func columns(steps []Migration, t Tables) (cols []Column, step []*Migration) {
	for i := range steps {
		for _, c := range steps[i].Adds {
			cols = append(cols, Column{Table: t.Expand(c.Table), Name: c.Name})
			step = append(step, &steps[i])
		}
	}
	return cols, step
}
