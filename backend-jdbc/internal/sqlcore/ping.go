package sqlcore

import (
	"context"
	"fmt"
	"time"
)

// minSilence is the least time a ping that failed must have waited to be
// taken for a server that did not answer: an error sooner is an answer (a
// reset connection, a refusal), whatever its type says.
const minSilence = 50 * time.Millisecond

// PingUntil calls ping, Open's check that the server answers, and calls it
// again after an error that silent reports as a server that did not
// answer in time by a driver's own, shorter timeout (pgx's connect
// timeout of a host, the DSN's readTimeout), for as long as ctx allows:
// Open waits for its context on a server that accepts connections and
// never answers, as documented. Without a deadline in ctx the first error
// is returned, as it is once ctx ends; the error then says that the server
// never answered. An error within minSilence is returned at once.
func PingUntil(ctx context.Context, ping func(context.Context) error, silent func(error) bool) error {
	var last error
	for {
		start := time.Now()
		err := ping(ctx)
		_, bounded := ctx.Deadline()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil && last != nil:
			return fmt.Errorf("%w (the server accepted connections but never answered: %v)", err, last) //nolint:errorlint // the cause is ctx's end
		case ctx.Err() != nil || !bounded || !silent(err) || time.Since(start) < minSilence:
			return err
		}
		last = err
	}
}
