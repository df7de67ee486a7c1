// Package broken wraps a backend with a deliberate bug, so that the
// robustness suite can show its checker catches the bug: a run with a
// broken build must fail the check.
//
// The bugs are the classic ways a lease implementation goes wrong:
//
//   - Margin: the granted validity is inflated by half, as an engine that
//     ignores drift and margin, or trusts the lease it asked for rather
//     than when it asked, would compute it. A paused holder then believes
//     in its term after the backend has handed the lease over.
//   - Revive: a keep-alive that finds its session expired answers as if it
//     had renewed it, with the leases it owned before: an expired session
//     comes back to life.
//   - Release: a release frees whatever term the session now holds for the
//     name, whatever token it was given, and arrives late: a release of an
//     old term ends a newer one (R-TERM-7 broken).
package broken

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// Mode names a bug.
type Mode string

// The bugs.
const (
	None    Mode = ""
	Margin  Mode = "margin"
	Revive  Mode = "revive"
	Release Mode = "release"
)

// ErrUnknownMode is returned by Wrap for a mode it does not know.
var ErrUnknownMode = errors.New("broken: unknown mode")

// lateRelease is how long a Release of the Release bug waits before it
// reaches the backend.
const lateRelease = 40 * time.Millisecond

// Wrap returns b with the bug of mode; mode None returns b itself.
func Wrap(b simba.OpenedBackend, mode Mode) (simba.OpenedBackend, error) {
	switch mode {
	case None:
		return b, nil
	case Margin, Revive, Release:
	default:
		return nil, fmt.Errorf("%w: %q (want margin, revive or release)", ErrUnknownMode, mode)
	}
	w := &wrapper{inner: b, mode: mode, lastGroups: map[simba.SessionID]map[string]int{},
		won: map[simba.SessionID]map[string]uint64{}}
	if n, ok := b.(simba.ReleaseNotifier); ok {
		return &notifyingWrapper{wrapper: w, n: n}, nil
	}
	return w, nil
}

type wrapper struct {
	inner simba.OpenedBackend
	mode  Mode

	mu         sync.Mutex
	lastGroups map[simba.SessionID]map[string]int    // the groups of each session's last reply
	won        map[simba.SessionID]map[string]uint64 // the last token each session won per name
}

type notifyingWrapper struct {
	*wrapper
	n simba.ReleaseNotifier
}

func (w *notifyingWrapper) WatchRelease(ctx context.Context, name string) (<-chan struct{}, error) {
	return w.n.WatchRelease(ctx, name)
}

func (w *wrapper) inflate(d time.Duration) time.Duration {
	if w.mode == Margin {
		return d + d/2
	}
	return d
}

func (w *wrapper) OpenSession(ctx context.Context, lease time.Duration) (simba.SessionGrant, error) {
	g, err := w.inner.OpenSession(ctx, lease)
	g.Remaining = w.inflate(g.Remaining)
	return g, err
}

func (w *wrapper) KeepAlive(ctx context.Context, s simba.SessionID, req simba.KeepAliveRequest) (simba.KeepAliveReply, error) {
	r, err := w.inner.KeepAlive(ctx, s, req)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		r.Remaining = w.inflate(r.Remaining)
		w.lastGroups[s] = maps.Clone(r.Groups)
		return r, nil
	}
	if w.mode == Revive && errors.Is(err, simba.ErrSessionExpired) {
		// Nothing lost: every term the engine holds stays valid.
		return simba.KeepAliveReply{Remaining: req.Lease, Groups: maps.Clone(w.lastGroups[s])}, nil
	}
	return r, err
}

func (w *wrapper) Acquire(ctx context.Context, s simba.SessionID, name string) (simba.AcquireResult, error) {
	r, err := w.inner.Acquire(ctx, s, name)
	return w.note(s, name, r, err)
}

// AcquirePermit forwards to the backend's, so that the broken builds
// break the permits of semaphores the way they break locks.
func (w *wrapper) AcquirePermit(ctx context.Context, s simba.SessionID, p simba.Permit) (simba.AcquireResult, error) {
	pa, ok := w.inner.(simba.PermitAcquirer)
	if !ok {
		return simba.AcquireResult{}, fmt.Errorf("broken: %w", simba.ErrNotSupported)
	}
	r, err := pa.AcquirePermit(ctx, s, p)
	return w.note(s, simba.PermitName(p.Semaphore, p.Slot), r, err)
}

// note records the token of a won acquire of name, for the late release.
func (w *wrapper) note(s simba.SessionID, name string, r simba.AcquireResult, err error) (simba.AcquireResult, error) {
	if err == nil && r.Won {
		w.mu.Lock()
		if w.won[s] == nil {
			w.won[s] = map[string]uint64{}
		}
		w.won[s][name] = r.Token
		w.mu.Unlock()
	}
	return r, err
}

func (w *wrapper) Release(ctx context.Context, s simba.SessionID, name string, token uint64) error {
	if w.mode == Release {
		t := time.NewTimer(lateRelease)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		w.mu.Lock()
		if latest := w.won[s][name]; latest > token {
			token = latest
		}
		w.mu.Unlock()
		// The caller's ctx may have ended while the release was late; the
		// late release still reaches the backend, as a slow network's would.
		ctx = context.WithoutCancel(ctx)
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return w.inner.Release(rctx, s, name, token)
	}
	return w.inner.Release(ctx, s, name, token)
}

func (w *wrapper) JoinGroup(ctx context.Context, s simba.SessionID, group string) (int, error) {
	return w.inner.JoinGroup(ctx, s, group)
}

func (w *wrapper) LeaveGroup(ctx context.Context, s simba.SessionID, group string) error {
	return w.inner.LeaveGroup(ctx, s, group)
}

func (w *wrapper) CloseSession(ctx context.Context, s simba.SessionID) error {
	w.mu.Lock()
	delete(w.lastGroups, s)
	delete(w.won, s)
	w.mu.Unlock()
	return w.inner.CloseSession(ctx, s)
}

func (w *wrapper) Close() error { return w.inner.Close() }
