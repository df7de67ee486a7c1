package sqlcore

import (
	"context"
	"fmt"
	"time"
)

// pingPause is the least time between two pings of PingUntil.
const pingPause = 50 * time.Millisecond

// PingUntil calls ping, Open's check that the server answers, and calls it
// again after an error that silent reports as a server that did not
// answer in time by a driver's own, shorter timeout (pgx's connect
// timeout of a host, the DSN's readTimeout), for as long as ctx allows:
// Open waits for its context on a server that accepts connections and
// never answers, as documented. Without a deadline in ctx the first error
// is returned, as it is once ctx ends; the error then says that the server
// never answered.
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
		case ctx.Err() != nil || !bounded || !silent(err):
			return err
		}
		last = err
		if time.Since(start) < pingPause {
			select {
			case <-ctx.Done():
			case <-time.After(pingPause):
			}
		}
	}
}
