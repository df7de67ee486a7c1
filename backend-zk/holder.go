package simbazk

import (
	"context"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// Holder reports who holds the lease name now, with one request: a
// get-data of Root/leases/{name}. The node's ephemeral owner is the
// holder's session (in the SessionID format of [Backend.OpenSession]), its
// czxid the token, its creation time the start of the term (by the clock
// of the server that led the ensemble then, to the millisecond) and its
// data the identity the session was opened with ([Backend.OpenSessionAs];
// empty without one). When the node does not exist, ok is false: the lease
// was never taken or was released, or its owner's session ended (the
// server deletes the nodes of a session when it closes or expires). A node
// created by hand, not ephemeral, blocks the name like a holder would: it
// is reported held by session "0000000000000000".
//
// The read goes over the backend's own read connection, the one that
// carries the release watches ([Backend.WatchRelease]), dialed on first
// use (connect, setAuth with Auth, one exists): never over a session's
// connection, whose requests would renew the session, so a backend with no
// session open can answer, and asking never keeps a session alive. That
// connection may be served by another server of the ensemble than the
// holder's, and a Zookeeper server answers reads from its own copy, which
// may lag the leader's by the moment it takes to apply the latest writes:
// a term a moment old may not show yet, as with any read of Zookeeper.
//
// The call returns when ctx is done. It returns a *simba.NameError for an
// invalid name and ErrClosed after Close.
func (b *Backend) Holder(ctx context.Context, name string) (simba.Holder, bool, error) {
	if err := simba.ValidateName(name); err != nil {
		return simba.Holder{}, false, err
	}
	held, err := onReadConn(ctx, b, "holder "+name, func(wc *watchConn) ([]simba.HeldLease, error) {
		return b.readLeases(ctx, wc, []string{name})
	})
	if err != nil || len(held) == 0 {
		return simba.Holder{}, false, err
	}
	return held[0].Holder, true, nil
}

// holderOf is the holder a lease node shows: its ephemeral owner, czxid,
// creation time and data (see Holder).
func holderOf(data []byte, st *zk.Stat) simba.Holder {
	h := simba.Holder{
		Session: sessionID(st.EphemeralOwner),
		Token:   uint64(st.Czxid),
		Since:   time.UnixMilli(st.Ctime),
	}
	if id := string(data); checkIdentity(id) == nil {
		h.Identity = id // data not written by Simba (by hand) is left out
	}
	return h
}

// checkIdentity accepts the identities simba.WithIdentity accepts
// (backendkit.CheckIdentity), and the empty one (no identity).
func checkIdentity(id string) error {
	if id == "" {
		return nil
	}
	if err := backendkit.CheckIdentity(id); err != nil {
		return fmt.Errorf("%w: identity: %w", simba.ErrInvalidArgument, err)
	}
	return nil
}
