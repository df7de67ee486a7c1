package simbaredis

import (
	"context"

	simba "github.com/simba-go/simba/core"
)

// Importing the package registers Open for the schemes redis and rediss
// with simba.OpenBackend.
func init() {
	simba.RegisterBackend("redis", openURL)
	simba.RegisterBackend("rediss", openURL)
}

// openURL is Open with zero Options, for simba.OpenBackend.
func openURL(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
	b, err := Open(ctx, rawURL, Options{})
	if err != nil {
		return nil, err
	}
	return b, nil
}
