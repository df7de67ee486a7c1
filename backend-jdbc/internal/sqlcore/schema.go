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

// Tables holds the three table names of one prefix.
type Tables struct {
	Session, Lease, Member string
}

// NewTables returns the tables of prefix.
func NewTables(prefix string) Tables {
	return Tables{Session: prefix + "session", Lease: prefix + "lease", Member: prefix + "group_member"}
}

// All returns the three names.
func (t Tables) All() []string { return []string{t.Session, t.Lease, t.Member} }

// Expand replaces {session}, {lease}, {member} and {p} (the prefix, for
// index names) in a statement template.
func (t Tables) Expand(q string) string {
	prefix := strings.TrimSuffix(t.Session, "session")
	return strings.NewReplacer(
		"{session}", t.Session,
		"{lease}", t.Lease,
		"{member}", t.Member,
		"{p}", prefix,
	).Replace(q)
}

// DDL returns the migration statements of templates for prefix, which must
// be valid.
func (p *Pkg) DDL(templates []string, prefix string) ([]string, error) {
	if err := p.validatePrefix(prefix); err != nil {
		return nil, err
	}
	t := NewTables(prefix)
	out := make([]string, len(templates))
	for i, q := range templates {
		out[i] = t.Expand(q)
	}
	return out, nil
}

// Script returns the migration of templates for prefix (DefaultTablePrefix
// when empty) as one SQL script, with a header naming database.
func (p *Pkg) Script(database string, templates []string, prefix string) (string, error) {
	if prefix == "" {
		prefix = DefaultTablePrefix
	}
	stmts, err := p.DDL(templates, prefix)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- Simba tables for %s, prefix %q. Idempotent: safe to apply again.\n", database, prefix)
	b.WriteString("-- Lease rows are never deleted: their token must never go back.\n\n")
	for _, s := range stmts {
		b.WriteString(s)
		b.WriteString(";\n\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
