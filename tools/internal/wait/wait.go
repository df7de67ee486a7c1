// Package wait holds the pause the tools of this repository share (the
// benchmarks, the robustness suite and its programs, the simba command's
// demo): a sleep that ends early, with the context's error, when the
// context ends first, so that a cancelled run never waits out a schedule.
package wait

import (
	"context"
	"time"
)

// Sleep waits d, or returns ctx's error when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
