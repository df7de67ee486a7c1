package topology

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/tools/chaos/internal/servers"
)

// findLib finds tools/testenv/lib.sh above the working directory: the
// scripts of every topology source it.
func findLib() (string, error) {
	lib, err := servers.FindLib()
	if err != nil {
		return "", fmt.Errorf("topology: %w", err)
	}
	return lib, nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	port, err := servers.FreePort()
	if err != nil {
		return 0, fmt.Errorf("topology: %w", err)
	}
	return port, nil
}

// pause waits d, or returns ctx's error when it ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
