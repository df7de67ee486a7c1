package simba

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/simba-go/simba/core/backendkit"
)

// Holder is the session that holds a lease, as the backend sees it.
type Holder struct {
	// Session is the holding session.
	Session SessionID `json:"session"`
	// Identity is the identity of the client that opened the session (see
	// WithIdentity); empty when the backend does not store one.
	Identity string `json:"identity,omitempty"`
	// Token is the fencing token of the holder's term.
	Token uint64 `json:"token"`
	// Since is when the holder's term began, by the backend's clock; zero
	// when the backend does not record it.
	Since time.Time `json:"since,omitzero"`
}

// ErrNotSupported is returned by calls that need a capability the backend
// does not implement.
var ErrNotSupported = errors.New("simba: not supported by the backend")

// MaxIdentity is the longest identity, in bytes.
const MaxIdentity = backendkit.MaxIdentity

// WithIdentity sets the identity the client's sessions carry on the
// backend, so that other nodes see who holds a lease (Client.Holder). It
// must be 1 to MaxIdentity bytes of printable UTF-8. The default is the
// host name and the process id, "host:pid".
func WithIdentity(id string) Option {
	return func(o *options) error {
		if err := validateIdentity(id); err != nil {
			return err
		}
		o.identity = id
		return nil
	}
}

// validateIdentity is backendkit.CheckIdentity, with an error matching
// ErrInvalidArgument.
func validateIdentity(id string) error {
	if err := backendkit.CheckIdentity(id); err != nil {
		return fmt.Errorf("%w: identity: %w", ErrInvalidArgument, err)
	}
	return nil
}

// defaultIdentity is "host:pid", or "pid:N" when the host name is unknown.
func defaultIdentity() string {
	pid := strconv.Itoa(os.Getpid())
	host, err := os.Hostname()
	if err != nil || validateIdentity(host+":"+pid) != nil {
		return "pid:" + pid
	}
	return host + ":" + pid
}

// Identity returns the identity the client's sessions carry.
func (c *Client) Identity() string { return c.identity }

// Holder asks the backend who holds the lease name now: any node, this one
// included. ok is false when nobody holds it. The call is bounded by ctx
// and by the renew interval (R-DL-2). It fails with a *NameError for an
// invalid name, before any backend call, with ErrNotSupported when the
// backend cannot tell, and with ErrClientNotStarted before the Start of a
// client built WithDeferredStart.
func (c *Client) Holder(ctx context.Context, name string) (h Holder, ok bool, err error) {
	if ctx == nil {
		return Holder{}, false, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ValidateName(name); err != nil {
		return Holder{}, false, err
	}
	if err := c.checkStarted(); err != nil {
		return Holder{}, false, fmt.Errorf("simba: holder of %s: %w", name, err)
	}
	r, can := c.b.(HolderReader)
	if !can {
		return Holder{}, false, fmt.Errorf("simba: holder of %s: %w", name, ErrNotSupported)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RenewInterval)
	defer cancel()
	h, ok, err = r.Holder(ctx, name)
	if err != nil {
		return Holder{}, false, fmt.Errorf("simba: holder of %s: %w", name, err)
	}
	return h, ok, nil
}

// ObserveHolder calls fn with the holder of the lease name (ok false when
// nobody holds it) now and every time it changes, until ctx is done (it
// returns ctx's error) or the client is closed (an error matching
// ErrClosed). It learns of a release at once on backends that
// broadcast releases, and of any change within one renew interval on every
// backend. A failed read is retried at the next interval; fn runs on the
// caller's goroutine, one call at a time. It fails at once where Holder
// fails before any backend call.
func (c *Client) ObserveHolder(ctx context.Context, name string, fn func(h Holder, ok bool)) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalidArgument)
	}
	if _, _, err := c.Holder(ctx, name); err != nil && (errors.Is(err, ErrNotSupported) || errors.Is(err, ErrInvalidName) ||
		errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrClientNotStarted)) {
		return err
	}
	var last Holder
	var lastOK, seen bool
	for {
		h, ok, err := c.Holder(ctx, name)
		if err == nil && (!seen || ok != lastOK || h != last) {
			seen, last, lastOK = true, h, ok
			fn(h, ok)
		}
		if err := c.waitHolderChange(ctx, name, err == nil && ok); err != nil {
			return err
		}
	}
}

// waitHolderChange waits one renew interval, or less when the lease is
// held and the backend reports its release; it returns ctx's error once
// ctx is done. Watches may fire at once on a free lease, and spuriously:
// they are used only while the lease is held, and never wake the loop
// sooner than MinBackoff.
func (c *Client) waitHolderChange(ctx context.Context, name string, held bool) error {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.cfg.RenewInterval)
	defer cancel()
	var released <-chan struct{}
	if held && c.notifier != nil {
		if ch, err := c.notifier.WatchRelease(wctx, name); err == nil {
			released = ch
		}
	}
	select {
	case <-released:
		if wait := c.cfg.MinBackoff - time.Since(start); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			case <-c.done:
			}
		}
	case <-wctx.Done():
	case <-c.done:
	}
	if c.isClosed() {
		return fmt.Errorf("simba: observe holder of %s: %w", name, ErrClosed)
	}
	return ctx.Err()
}
