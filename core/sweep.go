package simba

import (
	"context"
	"fmt"
	"time"
)

// Sweeper is implemented by backends that can remove the state they keep
// for lease names nobody uses any more, so that a lock per entity (an
// invoice, an order) does not leave a record per name for ever
// (docs/adr/0012-bounded-lease-state.md). The engine never calls it; an
// operator's job does, through Client.Sweep or the backend itself.
//
// Sweep removes the record of every name that no live session holds,
// nobody waits for, and whose last term began at least idle ago, and
// returns how many it removed. Tokens stay strictly increasing per name
// (R-TERM-2): in the step that removes records, the backend raises a floor
// to the highest token removed, and a name without a record starts its
// next term above that floor, so its tokens jump rather than count on. A
// backend may refuse an idle below its own minimum with an error matching
// ErrInvalidArgument. When ctx ends, what was removed stays removed.
type Sweeper interface {
	Sweep(ctx context.Context, idle time.Duration) (removed int, err error)
}

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
