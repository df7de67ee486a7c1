package simbamysql

import (
	"log/slog"

	"github.com/simba-go/simba/backend-jdbc/internal/sqlcore"
)

func (o Options) printed() sqlcore.Printed {
	return sqlcore.Printed{Type: "simbamysql.Options", TablePrefix: o.TablePrefix, Migrate: o.Migrate,
		CleanupInterval: o.CleanupInterval, TLS: o.TLS != nil, Password: o.Password, Logger: o.Logger != nil}
}

// String describes o with Password shown as "redacted" when set.
func (o Options) String() string { return o.printed().String() }

// GoString is String, so that %#v does not print the password either.
func (o Options) GoString() string { return o.printed().String() }

// LogValue makes slog print o with Password redacted.
func (o Options) LogValue() slog.Value { return o.printed().LogValue() }
