package features

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// Steps of partition groups (R-GRP-1, R-GRP-2).

// groupRun is one Group.Run of a node, and the partition work it ran.
type groupRun struct {
	n      int
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's error, once done is closed

	mu   sync.Mutex
	runs []*partRun
}

// partRun is one run of the partition function, for one term.
type partRun struct {
	partition   int
	term        *simba.Term
	start       time.Time
	interrupted time.Time // when its ctx ended; zero before
}

func (g *groupRun) fn(ctx context.Context, partition int, t *simba.Term) error {
	r := &partRun{partition: partition, term: t, start: time.Now()}
	g.mu.Lock()
	g.runs = append(g.runs, r)
	g.mu.Unlock()
	<-ctx.Done()
	g.mu.Lock()
	r.interrupted = time.Now()
	g.mu.Unlock()
	return nil
}

func (g *groupRun) snapshot() []partRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]partRun, len(g.runs))
	for i, r := range g.runs {
		out[i] = *r
	}
	return out
}

// nodeList reads "A", "A and B" or "A, B and C".
func nodeList(list string) []string {
	list = strings.ReplaceAll(list, " and ", ", ")
	return strings.Split(list, ", ")
}

func (w *world) runGroup(list, group string, parts int) error {
	for _, name := range nodeList(list) {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		g := w.name(group)
		ctx, cancel := context.WithCancel(w.ctx)
		gr := &groupRun{n: parts, cancel: cancel, done: make(chan struct{})}
		n.groups[g] = append(n.groups[g], gr)
		client := n.client
		n.goBackground(func() {
			defer close(gr.done)
			gr.err = client.Group(g, parts).Run(ctx, gr.fn)
		})
		w.settle()
		select {
		case <-gr.done:
			return fmt.Errorf("node %s: the group run returned at once: %w", name, gr.err)
		default:
		}
	}
	return nil
}

func (w *world) leaveGroup(name, group string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	runs := n.groups[w.name(group)]
	if len(runs) == 0 {
		return fmt.Errorf("node %s never ran the group %s", name, group)
	}
	gr := runs[len(runs)-1]
	gr.cancel()
	timer := time.NewTimer(w.grace(2 * n.cfg().LeaseDuration))
	defer timer.Stop()
	select {
	case <-gr.done:
		return gr.err
	case <-timer.C:
		return fmt.Errorf("node %s: leaving the group %s did not return", name, group)
	}
}

// holding returns the partitions of group the node holds now: those whose
// election has a valid term and whose work is running.
func (w *world) holding(n *node, group string, parts int) []int {
	var out []int
	for i := range parts {
		if t := n.client.Election(group + "." + strconv.Itoa(i)).Term(); t != nil && t.Valid() {
			out = append(out, i)
		}
	}
	return out
}

func (w *world) spread(phrase, group, list string) error {
	within, err := w.dur(phrase, w.timing)
	if err != nil {
		return err
	}
	g := w.name(group)
	members := nodeList(list)
	parts := 0
	for _, name := range members {
		n, err := w.node(name)
		if err != nil {
			return err
		}
		if runs := n.groups[g]; len(runs) > 0 {
			parts = runs[len(runs)-1].n
		}
	}
	if parts == 0 {
		return fmt.Errorf("none of %s runs the group %s", list, group)
	}
	lo, hi := parts/len(members), (parts+len(members)-1)/len(members)
	var last string
	err = w.eventually(within, "the partitions did not settle", func() bool {
		owner := make(map[int]string)
		var counts []string
		ok := true
		for _, n := range w.sortedNodes() {
			held := w.holding(n, g, parts)
			counts = append(counts, fmt.Sprintf("%s:%v", n.name, held))
			for _, i := range held {
				if other, dup := owner[i]; dup {
					last = fmt.Sprintf("partition %d held by %s and %s at once", i, other, n.name)
					return false
				}
				owner[i] = n.name
			}
			want := slices.Contains(members, n.name)
			if want && (len(held) < lo || len(held) > hi) || !want && len(held) > 0 {
				ok = false
			}
		}
		ok = ok && len(owner) == parts
		last = strings.Join(counts, " ")
		return ok
	})
	if err != nil {
		return fmt.Errorf("%w: want %d to %d each on %s; last seen %s", err, lo, hi, list, last)
	}
	return nil
}

// partitionTerms returns every partition run of group, across nodes.
func (w *world) partitionTerms(group string) map[int][]partRun {
	out := make(map[int][]partRun)
	for _, n := range w.sortedNodes() {
		for _, gr := range n.groups[group] {
			for _, r := range gr.snapshot() {
				out[r.partition] = append(out[r.partition], r)
			}
		}
	}
	return out
}

func (w *world) partitionsExclusive(group string) error {
	byPart := w.partitionTerms(w.name(group))
	if len(byPart) == 0 {
		return fmt.Errorf("no partition of %s ever ran", group)
	}
	for i, runs := range byPart {
		// The backend orders the terms of a lease by their tokens.
		slices.SortFunc(runs, func(a, b partRun) int { return cmp.Compare(a.term.Token(), b.term.Token()) })
		for k := 1; k < len(runs); k++ {
			prev, next := runs[k-1], runs[k]
			if prev.interrupted.IsZero() || prev.interrupted.After(next.start) {
				return fmt.Errorf("partition %d ran under %v while %v still ran", i, next.term, prev.term)
			}
			if next.term.Token() == prev.term.Token() {
				return fmt.Errorf("partition %d ran twice under the token %d", i, next.term.Token())
			}
		}
	}
	return nil
}

func (w *world) partitionLeases(group, pattern string) error {
	if pattern != group+".i" {
		return fmt.Errorf("features: the pattern %q should read %q", pattern, group+".i")
	}
	g := w.name(group)
	byPart := w.partitionTerms(g)
	if len(byPart) == 0 {
		return fmt.Errorf("no partition of %s ever ran", group)
	}
	for i, runs := range byPart {
		for _, r := range runs {
			if want := g + "." + strconv.Itoa(i); r.term.Name() != want {
				return fmt.Errorf("partition %d ran under a term of %s, want %s", i, r.term.Name(), want)
			}
		}
	}
	return nil
}

func (w *world) partitionsHeld(name, group string) error {
	n, err := w.node(name)
	if err != nil {
		return err
	}
	g := w.name(group)
	byPart := w.partitionTerms(g)
	if len(byPart) == 0 {
		return fmt.Errorf("no partition of %s ever ran", group)
	}
	for i := range byPart {
		ctx, cancel := n.stepCtx()
		lt, err := n.client.Lock(g + "." + strconv.Itoa(i)).TryAcquire(ctx)
		cancel()
		if err == nil {
			_ = lt.Release(context.Background())
			return fmt.Errorf("node %s won the lease %s.%d, which the group should hold", name, group, i)
		}
		if err := matches(err, "ErrLockHeld"); err != nil {
			return fmt.Errorf("%s.%d: %w", group, i, err)
		}
	}
	return nil
}
