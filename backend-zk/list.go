package simbazk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// listReads bounds the get-data requests of a page in flight at once.
const listReads = 32

// ListHolders returns a page of the leases held now whose names start
// with q.Prefix, in name order after q.Cursor, the last name of the page
// before (simba.HolderLister). A held lease is a node of Root/leases, so
// the page takes one get-children of Root/leases and a get-data of each
// node of the page, at most 32 in flight, reported as Holder reports
// them; a node deleted in between is left out. The get-children returns
// every held name, whatever the prefix: its cost, and its reply's size,
// grow with the number of leases held (about 10,000 names of 100 bytes
// fit in a default Zookeeper packet of 1 MiB; the client accepts larger
// replies). The requests go over the backend's read connection, as
// Holder's do, and see that server's copy of the tree. It fails with an
// error matching simba.ErrInvalidArgument for a query
// simba.ValidateListQuery refuses or a cursor that is not a lease name,
// and with ErrClosed after Close.
func (b *Backend) ListHolders(ctx context.Context, q simba.ListQuery) (simba.HolderPage, error) {
	if err := simba.ValidateListQuery(q); err != nil {
		return simba.HolderPage{}, err
	}
	if q.Cursor != "" && simba.ValidateName(q.Cursor) != nil {
		return simba.HolderPage{}, fmt.Errorf("simbazk: list cursor %.40q is not a lease name: %w", q.Cursor, simba.ErrInvalidArgument)
	}
	return onReadConn(ctx, b, "list holders", func(wc *watchConn) (simba.HolderPage, error) {
		var children []string
		err := wc.do(func() (err error) { children, _, err = wc.conn.Children(b.leasesDir); return err })
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return simba.HolderPage{}, nil // no lease taken yet
		case err != nil:
			return simba.HolderPage{}, err
		}
		names := slices.DeleteFunc(children, func(c string) bool {
			return c <= q.Cursor || !strings.HasPrefix(c, q.Prefix) || simba.ValidateName(c) != nil
		})
		slices.Sort(names)
		var p simba.HolderPage
		if len(names) > q.Limit {
			names = names[:q.Limit]
			p.Next = names[len(names)-1]
		}
		p.Leases, err = b.readLeases(ctx, wc, names)
		return p, err
	})
}

// readLeases reads the lease nodes of names on wc, listReads at a time,
// and returns the holders of those that exist, in the order of names. It
// stops at the first failure, or once ctx is done.
func (b *Backend) readLeases(ctx context.Context, wc *watchConn, names []string) ([]simba.HeldLease, error) {
	found := make([]simba.HeldLease, len(names)) // a zero Name: not held
	err := inParallel(ctx, len(names), listReads, func(i int) error {
		var data []byte
		var st *zk.Stat
		err := wc.do(func() (err error) { data, st, err = wc.conn.Get(b.leasePath(names[i])); return err })
		switch {
		case errors.Is(err, zk.ErrNoNode): // released since the listing
		case err != nil:
			return fmt.Errorf("read %s: %w", names[i], err)
		default:
			found[i] = simba.HeldLease{Name: names[i], Holder: holderOf(data, st)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(found, func(l simba.HeldLease) bool { return l.Name == "" }), nil
}
