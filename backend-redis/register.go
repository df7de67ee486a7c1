package simbaredis

import (
	"context"

	simba "github.com/simba-go/simba/core"
)

// Importing the package registers Open for the schemes redis and rediss,
// and for the Sentinel and Cluster forms redis+sentinel, rediss+sentinel,
// redis+cluster and rediss+cluster, with simba.OpenBackend.
func init() {
	for _, scheme := range []string{"redis", "rediss", schemeSentinel, schemeSentinelTLS, schemeCluster, schemeClusterTLS} {
		simba.RegisterBackend(scheme, openURL)
	}
}

// openURL is Open with zero Options, for simba.OpenBackend.
func openURL(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
	b, err := Open(ctx, rawURL, Options{})
	if err != nil {
		return nil, err
	}
	return b, nil
}
