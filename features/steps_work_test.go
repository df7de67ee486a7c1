package features

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// Steps of leader work (R-WORK-1) and scheduled work (R-WORK-2).

// schedule is a function a node runs with Election.Schedule, and its runs.
type schedule struct {
	period time.Duration
	takes  time.Duration // each run lasts this long, unless interrupted

	mu   sync.Mutex
	runs []schedRun
}

// schedRun is one run of a schedule.
type schedRun struct {
	term  *simba.Term
	valid bool // the term was valid when the run began
	start time.Time
}

func (s *schedule) fn(ctx context.Context, t *simba.Term) error {
	s.mu.Lock()
	s.runs = append(s.runs, schedRun{term: t, valid: t.Valid(), start: time.Now()})
	s.mu.Unlock()
	if s.takes > 0 {
		timer := time.NewTimer(s.takes)
		defer timer.Stop()
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
	}
	return nil
}

func (s *schedule) snapshot() []schedRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]schedRun(nil), s.runs...)
}

func (w *world) schedules(name, lease, every, fixedDelay, first, takes string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	if _, ok := n.schedules[l]; ok {
		return fmt.Errorf("node %s already schedules %s", name, lease)
	}
	period, err := n.dur(every)
	if err != nil {
		return err
	}
	s := &schedule{period: period}
	var opts []simba.WorkOption
	if fixedDelay != "" {
		opts = append(opts, simba.FixedDelay())
	}
	if first != "" {
		d, err := n.dur(first)
		if err != nil {
			return err
		}
		opts = append(opts, simba.WithInitialDelay(d))
	}
	if takes != "" {
		if s.takes, err = n.dur(takes); err != nil {
			return err
		}
	}
	n.schedules[l] = s
	started := make(chan error, 1)
	el := n.client.Election(l)
	n.goBackground(func() { started <- el.Schedule(w.ctx, period, s.fn, opts...) })
	w.settle()
	select {
	case err := <-started:
		if err != nil {
			return fmt.Errorf("schedule: %w", err)
		}
	default:
	}
	return nil
}

// wins returns the terms of lease the node won on the backend, as
// (session, token) pairs with the instant each win reached the client.
func (n *node) wins(lease string) []call {
	var out []call
	for _, c := range n.rec.filter(memory.OpAcquire, lease) {
		if c.won && c.err == nil {
			out = append(out, c)
		}
	}
	return out
}

func (w *world) workOncePerTerm(name, lease string, count int) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	l := w.name(lease)
	wk, ok := n.works[l]
	if !ok {
		return fmt.Errorf("node %s runs no work for %s", name, lease)
	}
	wins := n.wins(l)
	if len(wins) != count {
		return fmt.Errorf("node %s won %d terms of %s, want %d", name, len(wins), lease, count)
	}
	wk.mu.Lock()
	runs := make([]workRun, len(wk.runs))
	for i, r := range wk.runs {
		runs[i] = *r
	}
	wk.mu.Unlock()
	for _, c := range wins {
		var mine []workRun
		for _, r := range runs {
			if r.term.Token() == c.token && r.term.Session() == c.session {
				mine = append(mine, r)
			}
		}
		if len(mine) != 1 {
			return fmt.Errorf("the work ran %d times for the term of token %d, want once", len(mine), c.token)
		}
		r := mine[0]
		if r.term.Valid() {
			if !r.interrupted.IsZero() {
				return fmt.Errorf("the work of %v was interrupted while its term was valid", r.term)
			}
			continue
		}
		ended, err := n.revokedAt(r.term)
		if err != nil {
			return err
		}
		if r.interrupted.IsZero() {
			return fmt.Errorf("the work of %v was never interrupted, though its term ended with %s at %v",
				r.term, r.term.Reason(), ended)
		}
		if gap := r.interrupted.Sub(ended).Abs(); gap > w.tolerance() {
			return fmt.Errorf("the work of %v was interrupted %v away from the end of its term", r.term, gap)
		}
	}
	if len(runs) != count {
		return fmt.Errorf("the work ran %d times in all, for %d terms", len(runs), count)
	}
	return nil
}

func (w *world) scheduleOf(name, lease string) (*node, *schedule, error) {
	n, err := w.node(name)
	if err != nil {
		return nil, nil, err
	}
	s, ok := n.schedules[w.name(lease)]
	if !ok {
		return nil, nil, fmt.Errorf("node %s schedules no %s", name, lease)
	}
	return n, s, nil
}

func (w *world) scheduleStarts(name, lease, list string) error {
	n, s, err := w.scheduleOf(name, lease)
	if err != nil {
		return err
	}
	t := n.client.Election(w.name(lease)).Term()
	if t == nil {
		return fmt.Errorf("node %s has no term of %s", name, lease)
	}
	won, err := n.wonAt(t)
	if err != nil {
		return err
	}
	var want []time.Duration
	for _, f := range strings.Split(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("features: %w", err)
		}
		want = append(want, d)
	}
	var got []time.Duration
	for _, r := range s.snapshot() {
		if r.term == t {
			got = append(got, r.start.Sub(won))
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("runs started at %v after the win, want %v", got, want)
	}
	for i := range want {
		if (got[i] - want[i]).Abs() > w.tolerance() {
			return fmt.Errorf("runs started at %v after the win, want %v", got, want)
		}
	}
	return nil
}

func (w *world) ranPerPeriod(name, lease, loose string) error {
	n, s, err := w.scheduleOf(name, lease)
	if err != nil {
		return err
	}
	l := w.name(lease)
	wins := n.wins(l)
	if len(wins) == 0 {
		return fmt.Errorf("node %s never led %s", name, lease)
	}
	runs := s.snapshot()
	for _, c := range wins {
		var t *simba.Term
		count := 0
		for _, r := range runs {
			if r.term.Token() == c.token && r.term.Session() == c.session {
				t = r.term
				count++
			}
		}
		end := time.Now()
		if t != nil && !t.Valid() {
			if end, err = n.revokedAt(t); err != nil {
				return err
			}
		}
		want := int(end.Sub(c.end)/s.period) + 1
		slack := 0
		if loose != "" && !w.env.fake {
			slack = 1
		}
		if count < want-slack || count > want+slack {
			return fmt.Errorf("node %s ran %s %d times in a term of %v, want %d (period %v)",
				name, lease, count, end.Sub(c.end).Round(time.Millisecond), want, s.period)
		}
	}
	return nil
}

func (w *world) neverRan(name, lease string) error {
	_, s, err := w.scheduleOf(name, lease)
	if err != nil {
		return err
	}
	if runs := s.snapshot(); len(runs) > 0 {
		return fmt.Errorf("node %s ran %s %d times, first at %v", name, lease, len(runs), runs[0].start)
	}
	return nil
}

func (w *world) runsUnderValidTerms(lease, list, last string) error {
	total := 0
	for _, name := range append(strings.Split(list, ", "), last) {
		n, s, err := w.scheduleOf(name, lease)
		if err != nil {
			return err
		}
		for _, r := range s.snapshot() {
			total++
			if !r.valid {
				return fmt.Errorf("node %s began a run of %s under %v, which was not valid", name, lease, r.term)
			}
			if r.term.Reason() == simba.NotRevoked {
				continue
			}
			ended, err := n.revokedAt(r.term)
			if err != nil {
				return err
			}
			if r.start.After(ended) {
				return fmt.Errorf("node %s began a run of %s %v after %v ended", name, lease, r.start.Sub(ended), r.term)
			}
		}
	}
	if total == 0 {
		return fmt.Errorf("no run of %s at all", lease)
	}
	return nil
}
