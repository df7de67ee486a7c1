package simbaredis

import (
	"context"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// Importing the package registers Open for the schemes redis and rediss,
// and for the Sentinel and Cluster forms redis+sentinel, rediss+sentinel,
// redis+cluster and rediss+cluster, with simba.OpenBackend.
func init() {
	backendkit.Register(simba.RegisterBackend, openURL,
		"redis", "rediss", schemeSentinel, schemeSentinelTLS, schemeCluster, schemeClusterTLS)
}

// openURL is Open with zero Options, for simba.OpenBackend.
func openURL(ctx context.Context, rawURL string) (*Backend, error) {
	return Open(ctx, rawURL, Options{})
}
