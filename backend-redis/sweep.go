package simbaredis

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// sweepBatch is the number of lease keys one sweep script looks at.
const sweepBatch = 500

// Sweep removes the lease hashes of names that nobody holds, nobody waits
// for, and whose last term began at least idle ago (by the server's
// clock), so that the state Redis keeps stays bounded by the names in use
// rather than every name ever used. Tokens keep increasing: each batch
// raises the key P floor to the highest token it removed, in the same
// atomic step, and a name without a lease hash starts above the floor. A
// name that comes back after its hash was removed therefore gets a token
// above every token it had (tokens of a name are strictly increasing, not
// consecutive: see Acquire).
//
// Sweep walks the lease keys with SCAN, in batches of 500 checked and
// removed by one script each, so Redis is never blocked for long; run it
// from one node at a time, as often as the key space calls for. It
// returns the number of hashes removed. It fails with ErrInvalidOptions
// (and simba.ErrInvalidArgument) for an idle below one second, with ctx's
// error when ctx ends (what was removed before stays removed), and on a
// Ring client, whose keys it cannot walk. It is the backend's
// simba.Sweeper, which Client.Sweep calls.
func (b *Backend) Sweep(ctx context.Context, idle time.Duration) (int, error) {
	if b.closed.Load() {
		return 0, ErrClosed
	}
	if idle < time.Second {
		return 0, fmt.Errorf("%w: sweep idle time %v: must be at least 1s: %w", ErrInvalidOptions, idle, simba.ErrInvalidArgument)
	}
	if _, ring := b.client.(*redis.Ring); ring {
		return 0, fmt.Errorf("%w: Sweep cannot walk the keys of a Ring client", ErrInvalidOptions)
	}
	node, err := b.keyNode(ctx)
	if err != nil {
		return 0, wrapErr("sweep", err)
	}
	removed := 0
	iter := node.Scan(ctx, 0, globEscape(b.prefix)+"lease:*", sweepBatch).Iterator()
	batch := []string{b.prefix + "floor"}
	flush := func() error {
		if len(batch) == 1 {
			return nil
		}
		n, err := sweepScript.Run(ctx, b.client, batch, b.prefix, idle.Milliseconds()).Int()
		batch = batch[:1]
		removed += n
		return err
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) > sweepBatch {
			if err := flush(); err != nil {
				return removed, wrapErr("sweep", err)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return removed, wrapErr("sweep", err)
	}
	return removed, wrapErr("sweep", flush())
}

// globEscape quotes the characters SCAN's MATCH pattern treats specially.
var globEscape = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace
