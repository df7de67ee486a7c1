package simba

import (
	"context"
	"fmt"
	"time"
)

// Sweep asks the backend to remove the state of the lease names nobody
// has held or waited for in idle (see Sweeper), bounded by ctx. It fails
// with ErrNotSupported when the backend is not a Sweeper, and with
// ErrInvalidArgument for an idle that is not positive, and with
// ErrClientNotStarted before the Start of a client built
// WithDeferredStart. Run it from one
// node at a time (the leader of an election, or a scheduled job): two
// sweeps at once are safe but do the work twice.
func (c *Client) Sweep(ctx context.Context, idle time.Duration) (int, error) {
	if ctx == nil {
		return 0, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if idle <= 0 {
		return 0, fmt.Errorf("%w: sweep idle %v is not positive", ErrInvalidArgument, idle)
	}
	if err := c.checkStarted(); err != nil {
		return 0, fmt.Errorf("simba: sweep: %w", err)
	}
	s, can := c.b.(Sweeper)
	if !can {
		return 0, fmt.Errorf("simba: sweep: %w", ErrNotSupported)
	}
	n, err := s.Sweep(ctx, idle)
	if err != nil {
		return n, fmt.Errorf("simba: sweep: %w", err)
	}
	return n, nil
}
