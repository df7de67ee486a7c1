package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"

	"github.com/simba-go/simba/tools/internal/wait"
)

// reasonReleased is the end of a term its holder released.
const reasonReleased = "released"

// termRec is one term a client won.
type termRec struct {
	lock       string
	token      uint64
	start, end time.Time // when Acquire returned, when the holder stopped counting on it
	reason     string    // reasonReleased or the RevokeReason
}

type recorder struct {
	mu    sync.Mutex
	terms []termRec
}

func (r *recorder) add(t termRec) {
	r.mu.Lock()
	r.terms = append(r.terms, t)
	r.mu.Unlock()
}

func (r *recorder) all() []termRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.terms)
}

// window is one fault: begin is when Inject was called, at the
// disruptive moment it reports, injected when it returned, end when the
// settling time after it ended.
type window struct {
	fault                    string
	begin, at, injected, end time.Time
}

// contend starts the clients: each contends for every lock, holding each
// term it wins for a short while. done closes once every client is
// closed, after ctx ends.
func contend(ctx context.Context, o options, open func(context.Context) (simba.Backend, func(), error), rec *recorder) (<-chan struct{}, error) {
	type node struct {
		c     *simba.Client
		close func()
	}
	var nodes []node
	closeAll := func() {
		for _, n := range nodes {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = n.c.Close(cctx)
			cancel()
			n.close()
		}
	}
	for range o.clients {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		b, closeB, err := open(octx)
		cancel()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("open a node's backend: %w", err)
		}
		c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: o.lease}))
		if err != nil {
			closeB()
			closeAll()
			return nil, err
		}
		nodes = append(nodes, node{c, closeB})
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		for j := range o.locks {
			l := n.c.Lock(fmt.Sprintf("lock-%d", j))
			wg.Go(func() { lockLoop(ctx, l, o, rec) })
		}
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		closeAll()
		close(done)
	}()
	return done, nil
}

func lockLoop(ctx context.Context, l *simba.Lock, o options, rec *recorder) {
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 20*o.lease)
		lt, err := l.Acquire(actx)
		cancel()
		if err != nil {
			_ = wait.Sleep(ctx, 20*time.Millisecond)
			continue
		}
		r := termRec{lock: l.Name(), token: lt.Token(), start: time.Now()}
		hold := o.hold/2 + rand.N(o.hold+1)
		if l.Name() == "lock-0" {
			hold = o.longHold
		}
		timer := time.NewTimer(hold)
		select {
		case <-timer.C:
		case <-lt.Done():
		case <-ctx.Done():
		}
		timer.Stop()
		r.end = time.Now()
		switch reason := lt.Reason(); {
		case reason != simba.NotRevoked:
			r.reason = reason.String()
		case !lt.Valid():
			r.reason = "DEADLINE_SEEN"
		default:
			r.reason = reasonReleased
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.lease)
		_ = lt.Release(rctx) // a failed release leaves the lease to expire
		cancel()
		rec.add(r)
		_ = wait.Sleep(ctx, rand.N(20*time.Millisecond))
	}
}

type cost struct{ median, p99 time.Duration }

// acquireCost times n acquires of a free lock by one session, each
// followed by its release.
func acquireCost(ctx context.Context, open func(context.Context) (simba.Backend, func(), error), n int) (cost, error) {
	b, closeB, err := open(ctx)
	if err != nil {
		return cost{}, err
	}
	defer closeB()
	g, err := b.OpenSession(ctx, 30*time.Second)
	if err != nil {
		return cost{}, err
	}
	defer func() { _ = b.CloseSession(context.WithoutCancel(ctx), g.ID) }()
	d := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		r, err := b.Acquire(ctx, g.ID, "cost")
		if err != nil {
			return cost{}, err
		}
		d = append(d, time.Since(t0))
		if !r.Won {
			return cost{}, errors.New("the cost lock is held by another session")
		}
		if err := b.Release(ctx, g.ID, "cost", r.Token); err != nil {
			return cost{}, err
		}
	}
	slices.Sort(d)
	return cost{median: d[len(d)/2], p99: d[len(d)*99/100]}, nil
}

// faultStats are the figures of the faults of one kind.
type faultStats struct {
	n           int
	outage      []time.Duration // the longest stretch without a new term, from the disruptive moment
	ended       map[string]int  // terms revoked during the windows, by reason
	terms       int             // terms that began in the windows
	regressions int             // of them, with a token at or below one handed out before
	episodes    int             // of those, the first of a run of them on its lock
	first       []time.Duration // from the disruptive moment to the first term that began after it
	overlaps    int             // terms that began while another client still held its lock
	deepest     uint64          // the largest amount a token went back by
	depths      []uint64
}

func printReport(w io.Writer, name string, terms []termRec, windows []window) {
	sort.Slice(terms, func(i, j int) bool { return terms[i].start.Before(terms[j].start) })
	// Token regressions, per lock, in the order the terms began.
	highest := map[string]uint64{}
	back := make([]uint64, len(terms)) // 0: not a regression; else 1 + the amount
	starts := make([]bool, len(terms)) // the first regression after a term that was not one
	wasBack := map[string]bool{}
	for i, t := range terms {
		if h, ok := highest[t.lock]; ok && t.token <= h {
			back[i] = 1 + h - t.token
			starts[i] = !wasBack[t.lock]
		}
		wasBack[t.lock] = back[i] > 0
		if t.token > highest[t.lock] {
			highest[t.lock] = t.token
		}
	}
	// Terms that began before an earlier term of their lock had ended:
	// two clients counted on the lock at once.
	overlap := make([]bool, len(terms))
	heldUntil := map[string]time.Time{}
	for i, t := range terms {
		if t.start.Before(heldUntil[t.lock]) {
			overlap[i] = true
		}
		if t.end.After(heldUntil[t.lock]) {
			heldUntil[t.lock] = t.end
		}
	}
	stats := map[string]*faultStats{}
	var order []string
	for k, win := range windows {
		s := stats[win.fault]
		if s == nil {
			s = &faultStats{ended: map[string]int{}}
			stats[win.fault] = s
			order = append(order, win.fault)
		}
		s.n++
		next := win.end
		if k+1 < len(windows) {
			next = windows[k+1].begin
		}
		gap, last, first := time.Duration(0), win.at, time.Duration(-1)
		for i, t := range terms {
			if !t.start.Before(win.begin) && t.start.Before(next) {
				s.terms++
				if overlap[i] {
					s.overlaps++
				}
				if back[i] > 0 {
					s.regressions++
					s.depths = append(s.depths, back[i]-1)
					s.deepest = max(s.deepest, back[i]-1)
					if starts[i] {
						s.episodes++
					}
				}
			}
			if t.start.After(win.at) && !t.start.After(win.end) {
				if first < 0 {
					first = t.start.Sub(win.at)
				}
				gap = max(gap, t.start.Sub(last))
				last = t.start
			}
			if t.reason != reasonReleased && !t.end.Before(win.begin) && t.end.Before(next) {
				s.ended[t.reason]++
			}
		}
		gap = max(gap, win.end.Sub(last))
		s.outage = append(s.outage, gap)
		if first < 0 {
			first = win.end.Sub(win.at)
		}
		s.first = append(s.first, first)
	}
	fmt.Fprintf(w, "\n%s: %d terms in all\n", name, len(terms))
	fmt.Fprintf(w, "| fault | faults | first new term, median | max | longest gap, median | max | terms | overlapping | tokens back | runs of them | back by | terms ended by a fault |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range order {
		s := stats[f]
		slices.Sort(s.outage)
		slices.Sort(s.first)
		fmt.Fprintf(w, "| %s | %d | %v | %v | %v | %v | %d | %d | %d | %d | %s | %s |\n", f, s.n,
			round(s.first[len(s.first)/2]), round(s.first[len(s.first)-1]),
			round(s.outage[len(s.outage)/2]), round(s.outage[len(s.outage)-1]),
			s.terms, s.overlaps, s.regressions, s.episodes, depthText(s), reasonsText(s.ended))
	}
}

func depthText(s *faultStats) string {
	if s.regressions == 0 {
		return "-"
	}
	slices.Sort(s.depths)
	return fmt.Sprintf("median %d, max %d", s.depths[len(s.depths)/2], s.deepest)
}

func reasonsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
