package simba

import (
	"context"
	"fmt"
	"iter"
)

// MaxListLimit is the largest page of a listing of held leases
// (ListQuery.Limit).
const MaxListLimit = 1000

// MaxCursorLength bounds a listing's cursor, in bytes.
const MaxCursorLength = 64 << 10

// holdersPage is the page size of Client.Holders.
const holdersPage = 100

// ValidatePrefix returns nil when prefix may start a lease name: empty,
// or at most MaxNameLength bytes of [A-Za-z0-9._:-]. Unlike a name, "."
// and ".." are valid prefixes (of ".a", "..b"). The error matches
// ErrInvalidArgument and says what is wrong.
func ValidatePrefix(prefix string) error {
	if len(prefix) > MaxNameLength {
		return fmt.Errorf("%w: name prefix of %d bytes, at most %d allowed", ErrInvalidArgument, len(prefix), MaxNameLength)
	}
	for i := 0; i < len(prefix); i++ {
		if !nameByte(prefix[i]) {
			return fmt.Errorf("%w: name prefix %q: %s is not one of [A-Za-z0-9._:-]", ErrInvalidArgument, prefix, badCharacter(prefix, i))
		}
	}
	return nil
}

// ValidateListQuery returns nil when q is a well-formed query: a valid
// prefix, a limit from 1 to MaxListLimit, and a cursor of at most
// MaxCursorLength bytes of printable ASCII other than the space. Whether
// the cursor is one the backend returned is for the backend to check.
// The error matches ErrInvalidArgument. Client.ListHolders calls it
// before any backend call; backends may call it again.
func ValidateListQuery(q ListQuery) error {
	if err := ValidatePrefix(q.Prefix); err != nil {
		return err
	}
	if q.Limit < 1 || q.Limit > MaxListLimit {
		return fmt.Errorf("%w: list limit %d: want 1 to %d", ErrInvalidArgument, q.Limit, MaxListLimit)
	}
	if len(q.Cursor) > MaxCursorLength {
		return fmt.Errorf("%w: list cursor of %d bytes, at most %d allowed", ErrInvalidArgument, len(q.Cursor), MaxCursorLength)
	}
	for i := 0; i < len(q.Cursor); i++ {
		if c := q.Cursor[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: list cursor: byte 0x%02x at %d: a cursor is printable ASCII without spaces", ErrInvalidArgument, c, i)
		}
	}
	return nil
}

// ListHolders asks the backend for one page of the leases held now,
// by any node, whose names start with q.Prefix (see HolderLister): at
// most q.Limit of them, and the cursor of the next page, "" once the
// listing is complete. The call is bounded by ctx and by the renew
// interval (R-DL-2). It fails with an error matching ErrInvalidArgument
// for a query ValidateListQuery refuses, before any backend call, with
// ErrNotSupported when the backend cannot list, and with
// ErrClientNotStarted before the Start of a client built
// WithDeferredStart.
func (c *Client) ListHolders(ctx context.Context, q ListQuery) (HolderPage, error) {
	if ctx == nil {
		return HolderPage{}, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ValidateListQuery(q); err != nil {
		return HolderPage{}, err
	}
	if err := c.checkStarted(); err != nil {
		return HolderPage{}, fmt.Errorf("simba: list holders: %w", err)
	}
	l, can := c.b.(HolderLister)
	if !can {
		return HolderPage{}, fmt.Errorf("simba: list holders: %w", ErrNotSupported)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RenewInterval)
	defer cancel()
	p, err := l.ListHolders(ctx, q)
	if err != nil {
		return HolderPage{}, fmt.Errorf("simba: list holders: %w", err)
	}
	return p, nil
}

// Holders walks every page of the leases held under prefix ("" for all),
// one ListHolders call of 100 leases at a time, each bounded by ctx and
// by the renew interval. A failed call ends the walk with its error (a
// zero HeldLease and the error); breaking out of the loop stops it. The
// walk is not one snapshot (see HolderLister): on Redis a name may show
// twice.
func (c *Client) Holders(ctx context.Context, prefix string) iter.Seq2[HeldLease, error] {
	return func(yield func(HeldLease, error) bool) {
		q := ListQuery{Prefix: prefix, Limit: holdersPage}
		for {
			p, err := c.ListHolders(ctx, q)
			if err != nil {
				yield(HeldLease{}, err)
				return
			}
			for _, l := range p.Leases {
				if !yield(l, nil) {
					return
				}
			}
			switch p.Next {
			case "":
				return
			case q.Cursor:
				yield(HeldLease{}, fmt.Errorf("simba: list holders: the backend returned the cursor it was given"))
				return
			}
			q.Cursor = p.Next
		}
	}
}
