package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/tools/internal/wait"
)

func opHandoverW(waiters int) string { return fmt.Sprintf("handover_w%d", waiters) }

// herdHandover measures handovers of one lock among waiters+1 nodes, each
// a Simba client on a backend of its own: one holds the lock, the others
// wait in Lock.Acquire. The holder releases; the time from the start of its
// release to the next holder's win is one sample, and the server commands
// counted from the release until the others settled again (settle later)
// are that handover's cost, the herd's losing attempts and new watches
// included. The released node then waits again, so the number of waiters
// stays the same. ops_s is one over the mean handover time.
type herdHandover struct {
	lid     lineID
	s       *settings
	waiters int
	// open returns the backend of one node and what closes it.
	open   func(ctx context.Context) (simba.Backend, func() error, error)
	server counter
}

func (h *herdHandover) id() lineID { return h.lid }

// herdWin is one node's win.
type herdWin struct {
	node int
	at   time.Time
}

func (h *herdHandover) round(ctx context.Context) (_ sample, err error) {
	n := h.waiters + 1
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.s.handovers+2)*(2*h.s.settle+opGrace))
	defer cancel()
	locks := make([]*simba.Lock, n)
	for i := range n {
		b, closeB, err := h.open(ctx)
		if err != nil {
			return sample{}, err
		}
		c, err := simba.New(b)
		if err != nil {
			return sample{}, errors.Join(err, closeB())
		}
		defer func() { err = errors.Join(err, closeClient(c), closeB()) }()
		locks[i] = c.Lock("herd")
	}
	first, err := locks[0].Acquire(ctx)
	if err != nil {
		return sample{}, fmt.Errorf("first acquire: %w", err)
	}

	// Node i holds the lock after a win, gives it back when told on
	// release[i], then waits for it again.
	wins := make(chan herdWin, n)
	release := make([]chan struct{}, n)
	for i := range release {
		release[i] = make(chan struct{}, 1)
	}
	nctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			term := (*simba.LockTerm)(nil)
			if i == 0 {
				term = first
			}
			for {
				if term == nil {
					t, err := locks[i].Acquire(nctx)
					if err != nil {
						if nctx.Err() == nil {
							errs[i] = err
						}
						return
					}
					term = t
					wins <- herdWin{i, time.Now()}
				}
				select {
				case <-nctx.Done():
					errs[i] = term.Release(context.WithoutCancel(nctx))
					return
				case <-release[i]:
				}
				if err := term.Release(nctx); err != nil {
					errs[i] = err
					return
				}
				term = nil
			}
		})
	}
	defer func() {
		stop()
		wg.Wait()
		err = errors.Join(err, errors.Join(errs...))
	}()

	holder := 0
	var lats []time.Duration
	var cmds []float64
	for i := range h.s.handovers + 1 { // the first dials the watch connections: not measured
		if err := wait.Sleep(ctx, h.s.settle); err != nil {
			return sample{}, err
		}
		before, err := h.server(ctx)
		if err != nil {
			return sample{}, err
		}
		t0 := time.Now()
		release[holder] <- struct{}{}
		var w herdWin
		select {
		case w = <-wins:
		case <-ctx.Done():
			return sample{}, fmt.Errorf("no node won the lock after node %d released it: %w", holder, ctx.Err())
		}
		if err := wait.Sleep(ctx, h.s.settle); err != nil { // the others lose and watch again
			return sample{}, err
		}
		after, err := h.server(ctx)
		if err != nil {
			return sample{}, err
		}
		if i > 0 {
			lats = append(lats, w.at.Sub(t0))
			cmds = append(cmds, float64(after-before))
		}
		holder = w.node
	}
	var sum time.Duration
	for _, d := range lats {
		sum += d
	}
	s := sample{opsS: float64(len(lats)) / sum.Seconds()}
	s.p50, s.p99 = latencies(slices.Clone(lats))
	slices.Sort(cmds)
	s.extra = []metric{{"calls_per_handover", cmds[len(cmds)/2]}}
	return s, nil
}
