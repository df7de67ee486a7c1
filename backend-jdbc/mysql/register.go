package simbamysql

import (
	"context"

	simba "github.com/simba-go/simba/core"
)

// Importing the package registers Open for the scheme mysql with
// simba.OpenBackend. A go-sql-driver DSN, having no scheme, cannot be
// opened that way: give it to Open.
func init() {
	simba.RegisterBackend("mysql", openURL)
}

// openURL is Open with zero Options (default table prefix, no migration,
// no logging), for simba.OpenBackend. Its errors about the URL match
// simba.ErrInvalidURL as well as ErrInvalidOptions.
func openURL(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
	b, err := Open(ctx, rawURL, Options{})
	if err != nil {
		return nil, err
	}
	return b, nil
}
