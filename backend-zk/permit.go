package simbazk

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
)

// errMoved says that the permits record changed between its read and the
// multi that was to take a slot against it.
var errMoved = errors.New("permits record moved")

// AcquirePermit acquires slot p.Slot of semaphore p.Semaphore, the lease
// simba.PermitName(p.Semaphore, p.Slot), as [Backend.Acquire] does (same
// claims, queue and watches). The recorded number of permits is the data
// of the persistent node Root/permits/{semaphore}. When it differs from
// p.Permits while a slot below it has a node, the call fails with
// simba.ErrPermitsMismatch. Otherwise the set-data of p.Permits on the
// record, guarded by the version read, goes in the multi that creates the
// slot's node, so every grant of a permit bumps the record and a grant
// decided on a stale read fails and is decided again. Tokens are czxids,
// which grow over the whole ensemble, so a new slot node's token is above
// every earlier token of the semaphore.
func (b *Backend) AcquirePermit(ctx context.Context, id simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	if err := simba.ValidatePermit(p); err != nil {
		return simba.AcquireResult{}, err
	}
	name := simba.PermitName(p.Semaphore, p.Slot)
	return onSession(ctx, b, id, "acquire", name, func(s *session) (simba.AcquireResult, error) {
		for {
			pre, err := s.permits(ctx, p)
			if err != nil {
				return simba.AcquireResult{}, err
			}
			res, err := s.acquire(ctx, name, pre)
			if !errors.Is(err, errMoved) {
				return res, err
			}
		}
	})
}

// permits reads the permits record of p.Semaphore, creating it if missing,
// checks p.Permits against it and returns the guarded set-data to send
// with the slot's create.
func (s *session) permits(ctx context.Context, p simba.Permit) ([]any, error) {
	path := s.b.opts.Root + "/permits/" + p.Semaphore
	op := "acquire permit of " + p.Semaphore
	data := []byte(strconv.Itoa(p.Permits))
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("simbazk: %s: %w", op, err)
		}
		var got []byte
		var st *zk.Stat
		err := s.do(func() (err error) { got, st, err = s.conn.Get(path); return err })
		if errors.Is(err, zk.ErrNoNode) {
			if err = s.do(func() error { return s.b.ensureParents(s.conn, path) }); err == nil {
				if err = s.do(func() error { _, err := s.conn.Create(path, data, 0, s.b.opts.ACL); return err }); errors.Is(err, zk.ErrNodeExists) {
					err = nil
				}
			}
			if err == nil {
				continue
			}
		}
		if err != nil {
			return nil, s.failed(ctx, op, err)
		}
		n, err := strconv.Atoi(string(got))
		if err != nil || n < 1 || n > simba.MaxPermits {
			n = 0 // not a record this backend wrote: no slot to check
		}
		for i := 0; i < n && n != p.Permits; i++ {
			var held bool
			err := s.do(func() (err error) {
				held, _, err = s.conn.Exists(s.b.leasePath(simba.PermitName(p.Semaphore, i)))
				return err
			})
			if err != nil {
				return nil, s.failed(ctx, op, err)
			}
			if held {
				return nil, fmt.Errorf("simbazk: %s: asked with %d permits, %d recorded while slot %d is held: %w", op, p.Permits, n, i, simba.ErrPermitsMismatch)
			}
		}
		return []any{&zk.SetDataRequest{Path: path, Data: data, Version: st.Version}}, nil
	}
}

// moved returns errMoved for a bad version, and what failed returns for
// any other error.
func (s *session) moved(ctx context.Context, op string, err error) error {
	if errors.Is(err, zk.ErrBadVersion) {
		return errMoved
	}
	return s.failed(ctx, op, err)
}
