package simbapg

import (
	"context"
	"strings"

	simba "github.com/simba-go/simba/core"
)

// Importing the package registers Open for the schemes postgres and
// postgresql with simba.OpenBackend.
func init() {
	simba.RegisterBackend("postgres", openURL)
	simba.RegisterBackend("postgresql", openURL)
}

// openURL is Open with zero Options (default table prefix, no migration,
// no logging), for simba.OpenBackend. Its errors about the URL match
// simba.ErrInvalidURL as well as ErrInvalidOptions.
//
// simba.OpenBackend passes the scheme in any case, and pgx recognises a
// URL by its lower-case prefix only (it would read "POSTGRES://..." as a
// keyword/value string and connect to its defaults): the scheme is put in
// lower case first.
func openURL(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
	if scheme, rest, ok := strings.Cut(rawURL, "://"); ok {
		rawURL = strings.ToLower(scheme) + "://" + rest
	}
	b, err := Open(ctx, rawURL, Options{})
	if err != nil {
		return nil, err
	}
	return b, nil
}
