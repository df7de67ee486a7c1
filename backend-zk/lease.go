package simbazk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// acquireTries bounds how often Acquire retries when the node changes under
// it (freed, or replaced) between two of its requests.
const acquireTries = 4

// Acquire creates the ephemeral node Root/leases/{name} for session id; the
// token is the node's czxid and the data the session's identity (see
// [Backend.OpenSessionAs]; empty without one). Creating the node, writing
// its data and reading its stat is one request (a multi of create and
// set-data), so an uncontended acquire is one round trip. When the node
// exists and another session owns it, the result is not won. When id
// itself owns it, a new term starts: the node is deleted and created again
// in one multi guarded by its version, so the token grows. Missing parents
// of the node are created on first use (see session.create).
//
// The requests of an Acquire and of a Release of the same name by the same
// session never interleave: each takes the name's lock in the session for
// all its requests (see [Backend.Release]). Waiting for that lock ends with
// ctx.
//
// It returns a *simba.NameError for an invalid name, and
// simba.ErrSessionExpired once the session expired.
func (b *Backend) Acquire(ctx context.Context, id simba.SessionID, name string) (simba.AcquireResult, error) {
	return onSession(ctx, b, id, "acquire", name, func(s *session) (simba.AcquireResult, error) { return s.acquire(ctx, name, nil) })
}

// acquire takes the lease name. The requests in pre, if any, are sent in
// the same multi as the create of the node; should they fail with a bad
// version, acquire returns errMoved and creates nothing.
func (s *session) acquire(ctx context.Context, name string, pre []any) (simba.AcquireResult, error) {
	path := s.b.leasePath(name)
	op := "acquire " + name
	unlock, err := s.lockName(ctx, name, true)
	if err != nil {
		return simba.AcquireResult{}, fmt.Errorf("simbazk: %s: %w", op, err)
	}
	defer unlock()
	s.mu.Lock()
	s.note(name, nil) // the node may change from here on
	s.mu.Unlock()
	if c := s.takeClaim(name); c != nil {
		if c.stat != nil && len(pre) > 0 {
			// The claim's create did not send pre, and its czxid may be
			// below a token the semaphore got since: the node is made
			// again in the multi that sends pre, so that the permit's
			// token is that of its grant.
			st, err := s.replace(path, leaseVersion, pre)
			if err != nil {
				_ = s.do(func() error { return s.conn.Delete(path, leaseVersion) })
				return simba.AcquireResult{}, s.moved(ctx, op, err)
			}
			c.stat = st
		}
		if c.stat != nil {
			return s.won(op, name, path, c.stat)
		}
		s.noteLost(name)
		return simba.AcquireResult{}, nil // created by another session since the deletion
	}
	for range acquireTries {
		if err := ctx.Err(); err != nil {
			return simba.AcquireResult{}, fmt.Errorf("simbazk: %s: %w", op, err)
		}
		st, err := s.create(path, s.identity, pre...)
		switch {
		case err == nil:
			return s.won(op, name, path, st)
		case !errors.Is(err, zk.ErrNodeExists):
			return simba.AcquireResult{}, s.moved(ctx, op, err)
		}
		var ok bool
		var cur *zk.Stat
		err = s.do(func() (err error) { ok, cur, err = s.conn.Exists(path); return err })
		switch {
		case err != nil:
			return simba.AcquireResult{}, s.failed(ctx, op, err)
		case !ok:
			continue // freed in between: try again
		case cur.EphemeralOwner != s.zid.Load():
			s.noteLost(name)
			return simba.AcquireResult{}, nil
		}
		s.b.between(op)
		// This session owns it: start a new term with a new node. The
		// version does not tell this node from a later one (every lease
		// node is at version 1), but under the name's lock only an expiry
		// or a deletion by hand can replace it in between.
		st, err = s.replace(path, cur.Version, pre)
		switch {
		case err == nil:
			return s.won(op, name, path, st)
		case len(pre) > 0 && errors.Is(err, zk.ErrBadVersion):
			return simba.AcquireResult{}, s.moved(ctx, op, err)
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists):
			continue // changed in between: look again
		default:
			return simba.AcquireResult{}, s.failed(ctx, op, err)
		}
	}
	return simba.AcquireResult{}, nil
}

// create creates the ephemeral node path with data and returns its stat,
// in one request: the set-data that writes the data also gives the stat.
// When a parent is missing, it creates the parents, then the node again.
// The requests in pre, if any, go first in the same multi.
func (s *session) create(path string, data []byte, pre ...any) (*zk.Stat, error) {
	ops := slices.Concat(pre, s.newNode(path, data))
	st, err := s.multi(ops...)
	if errors.Is(err, zk.ErrNoNode) {
		if err = s.do(func() error { return s.b.ensureParents(s.conn, path) }); err == nil {
			st, err = s.multi(ops...)
		}
	}
	return st, err
}

// replace deletes the node at path, at version, and creates the session's
// own lease node in its place, in one multi after the requests in pre.
func (s *session) replace(path string, version int32, pre []any) (*zk.Stat, error) {
	del := &zk.DeleteRequest{Path: path, Version: version}
	return s.multi(slices.Concat(pre, []any{del}, s.newNode(path, s.identity))...)
}

// newNode returns the requests that create the ephemeral node path with
// data: a create, and the set-data that writes the data and whose reply
// carries the new node's stat.
func (s *session) newNode(path string, data []byte) []any {
	return []any{
		&zk.CreateRequest{Path: path, Acl: s.b.opts.ACL, Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: path, Data: data, Version: -1},
	}
}

// multi sends ops in one multi and returns the stat of its last reply.
func (s *session) multi(ops ...any) (*zk.Stat, error) {
	var res []zk.MultiResponse
	err := s.do(func() (err error) { res, err = s.conn.Multi(ops...); return err })
	if err == nil && (len(res) != len(ops) || res[len(res)-1].Stat == nil) {
		err = errors.New("unexpected multi reply")
	}
	if err != nil {
		return nil, err
	}
	return res[len(res)-1].Stat, nil
}

// won records a node this session just created. A node owned by another
// Zookeeper session means the connection is no longer this session's: the
// node is removed and the session is expired.
func (s *session) won(op, name, path string, st *zk.Stat) (simba.AcquireResult, error) {
	if st.EphemeralOwner != s.zid.Load() {
		_ = s.do(func() error { return s.conn.Delete(path, st.Version) })
		s.expire("a node was created by another session on its connection")
		return simba.AcquireResult{}, s.failed(context.Background(), op, zk.ErrSessionExpired)
	}
	s.mu.Lock()
	s.note(name, &node{czxid: st.Czxid})
	delete(s.waiting, name)
	s.mu.Unlock()
	return simba.AcquireResult{Won: true, Token: uint64(st.Czxid)}, nil
}

// leaseVersion is the data version of every lease node this backend
// creates: created, then written once by the set-data of the same multi.
const leaseVersion = 1

// Release deletes Root/leases/{name} if session id owns it with exactly
// token (its czxid) and is a no-op otherwise, so a late release never frees
// a later term. When the session knows the node as its own (it created it,
// or a keep-alive read it so, and no watch fired since: see node), a
// release of another token sends nothing, and a release of that token is
// one request, a delete of the node at the version its acquire left it.
// Otherwise, or should the version differ (the data changed by hand), the
// node's stat is read and the delete is sent only when the owner and czxid
// match: two requests.
//
// Zookeeper cannot delete a node on the condition of its czxid, and the
// version cannot tell one node of the name from the next (each is at
// version 1), so a release would race with an Acquire of the same name by
// the same session: that Acquire could replace the node in between and
// lose its new term to this delete, or, having read the node before this
// delete, delete the node another session created right after it. Both
// calls therefore take the name's lock in the session, on the goroutine
// that sends the requests, and hold it until their last request is
// answered, even when ctx ends first. Waiting for the lock ends with ctx;
// the session keeps a lock only while a call holds or waits for it. Only a
// hand deletion of the node followed by another session's create, before
// this session's next keep-alive noticed it, lets a release delete a node
// it does not own (see docs/adr/0014-zookeeper-one-request-release-and-staged-claims.md).
func (b *Backend) Release(ctx context.Context, id simba.SessionID, name string, token uint64) error {
	_, err := onSession(ctx, b, id, "release", name, func(s *session) (struct{}, error) {
		if token == 0 || token > math.MaxInt64 {
			return struct{}{}, nil // no node ever had that czxid
		}
		return struct{}{}, s.release(ctx, name, int64(token))
	})
	return goneIsNoOp(err)
}

// goneIsNoOp is the error of a Release or LeaveGroup: nil when the session
// is unknown or expired, whose ephemeral nodes are gone with it, as the
// SPI makes those calls no-ops.
func goneIsNoOp(err error) error {
	if errors.Is(err, simba.ErrSessionExpired) {
		return nil
	}
	return err
}

func (s *session) release(ctx context.Context, name string, token int64) error {
	path := s.b.leasePath(name)
	op := "release " + name
	unlock, err := s.lockName(ctx, name, true)
	if err != nil {
		return fmt.Errorf("simbazk: %s: %w", op, err)
	}
	defer unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simbazk: %s: %w", op, err)
	}
	s.mu.Lock()
	n, known := s.nodes[name]
	if known && n.czxid != token {
		s.mu.Unlock()
		return nil // the node is the session's, at a later term
	}
	s.note(name, nil) // whatever the outcome
	s.mu.Unlock()
	s.b.between(op)
	if known {
		err = s.do(func() error { return s.conn.Delete(path, leaseVersion) })
	}
	if !known || errors.Is(err, zk.ErrBadVersion) {
		err = s.releaseChecked(path, token)
	}
	if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
		return s.failed(ctx, op, err)
	}
	return nil
}

// releaseChecked deletes the node at path when it is this session's at
// czxid token, whatever its version: the slow path of a release.
func (s *session) releaseChecked(path string, token int64) error {
	var ok bool
	var st *zk.Stat
	err := s.do(func() (err error) { ok, st, err = s.conn.Exists(path); return err })
	if err != nil || !ok || st.EphemeralOwner != s.zid.Load() || st.Czxid != token {
		return err
	}
	return s.do(func() error { return s.conn.Delete(path, st.Version) })
}

// nameLock serialises the requests of one lease name within a session. The
// lock is a channel with room for one value, so that waiting for it can end
// with a context.
type nameLock struct {
	held chan struct{}
	refs int // calls holding or waiting for the lock; guarded by session.mu
}

// lockName takes the lock of lease name for the calling goroutine, which
// must be the one sending the requests, and returns the function that gives
// it back. Waiting ends with ctx, with ctx's error; without wait it does
// not wait, and fails with errNameBusy when a call holds the lock. The
// session's map keeps a lock only while a call holds or waits for it.
func (s *session) lockName(ctx context.Context, name string, wait bool) (unlock func(), err error) {
	s.mu.Lock()
	l := s.names[name]
	if l == nil {
		l = &nameLock{held: make(chan struct{}, 1)}
		s.names[name] = l
	}
	l.refs++
	s.mu.Unlock()
	drop := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if l.refs--; l.refs == 0 && s.names[name] == l {
			delete(s.names, name)
		}
	}
	unlock = func() { <-l.held; drop() }
	select {
	case l.held <- struct{}{}:
		return unlock, nil
	default:
	}
	if !wait {
		drop()
		return nil, errNameBusy
	}
	select {
	case l.held <- struct{}{}:
		return unlock, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}

// errNameBusy is what lockName answers without waiting when a call holds
// the lock.
var errNameBusy = errors.New("simbazk: a call of the session holds the name")

// JoinGroup creates the ephemeral member node Root/groups/{group}/{id} and
// returns the number of children of Root/groups/{group}: two round trips.
// The group name follows the rules of lease names.
func (b *Backend) JoinGroup(ctx context.Context, id simba.SessionID, group string) (int, error) {
	return onSession(ctx, b, id, "join group", group, func(s *session) (int, error) { return s.join(ctx, group) })
}

func (s *session) join(ctx context.Context, group string) (int, error) {
	op := "join group " + group
	dir := s.b.groupPath(group)
	member := dir + "/" + string(s.id())
	if _, err := s.create(member, nil); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return 0, s.failed(ctx, op, err)
	}
	s.mu.Lock()
	s.groups[group] = struct{}{}
	s.mu.Unlock()
	var st *zk.Stat
	err := s.do(func() (err error) { _, st, err = s.conn.Exists(dir); return err })
	if err != nil {
		return 0, s.failed(ctx, op, err)
	}
	return members(st), nil
}

// members is the member count of a group whose node has stat st (nil when
// the node does not exist).
func members(st *zk.Stat) int {
	if st == nil {
		return 0
	}
	return int(st.NumChildren)
}

// LeaveGroup deletes the member node of session id in group; leaving a
// group the session is not in is a no-op.
func (b *Backend) LeaveGroup(ctx context.Context, id simba.SessionID, group string) error {
	_, err := onSession(ctx, b, id, "leave group", group, func(s *session) (struct{}, error) {
		s.mu.Lock()
		delete(s.groups, group)
		s.mu.Unlock()
		err := s.do(func() error { return s.conn.Delete(s.b.groupPath(group)+"/"+string(s.id()), -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return struct{}{}, s.failed(ctx, "leave group "+group, err)
		}
		return struct{}{}, nil
	})
	return goneIsNoOp(err)
}
