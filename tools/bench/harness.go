package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	simba "github.com/simba-go/simba/core"
)

// opGrace bounds how long one operation may overrun the end of its round
// before the round's context is cancelled: a lock that never comes back
// fails the measurement instead of hanging the run.
const opGrace = 15 * time.Second

// lineID names one measurement, that is one output line.
type lineID struct{ backend, impl, op string }

func (id lineID) String() string { return id.backend + " " + id.impl + " " + id.op }

// metric is a named value printed after the latencies of a line.
type metric struct {
	name  string
	value float64
}

// sample is what one round of one case measured.
type sample struct {
	opsS     float64
	p50, p99 time.Duration
	extra    []metric // the same names in every round of a case
}

// benchCase is one implementation of one operation on one backend. The
// harness calls round once per round, interleaved with the other cases of
// its group, and prints the medians.
type benchCase interface {
	id() lineID
	round(ctx context.Context) (sample, error)
}

// group is a set of cases whose rounds are interleaved: A B C A B C ...
type group struct {
	cases  []benchCase
	rounds int
}

// interleave runs rounds of every case in turn and writes one line per
// case with the medians over its rounds. A case whose round fails is
// reported on log and dropped; the others go on. A case whose round fails
// with an error matching simba.ErrNotSupported is dropped with a note on
// log and counts as no failure. It returns the failures
// joined, or ctx.Err() when ctx ends first.
func interleave(ctx context.Context, g group, out, log io.Writer) error {
	samples := make([][]sample, len(g.cases))
	failed := make([]error, len(g.cases))
	skipped := make([]bool, len(g.cases))
	for r := range g.rounds {
		for i, c := range g.cases {
			if failed[i] != nil || skipped[i] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			s, err := c.round(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, simba.ErrNotSupported) {
					// The backend lacks the capability the case measures:
					// no line, and no failure of the run.
					skipped[i] = true
					fmt.Fprintf(log, "bench: %v: skipped, the backend does not support it: %v\n", c.id(), err)
					continue
				}
				failed[i] = fmt.Errorf("%v: round %d: %w", c.id(), r+1, err)
				fmt.Fprintf(log, "bench: %v\n", failed[i])
				continue
			}
			samples[i] = append(samples[i], s)
		}
	}
	for i, c := range g.cases {
		if failed[i] == nil && len(samples[i]) > 0 {
			fmt.Fprintln(out, formatLine(c.id(), medianSample(samples[i])))
		}
	}
	return errors.Join(failed...)
}

// medianSample takes the median of every field over the rounds
// separately.
func medianSample(ss []sample) sample {
	col := func(f func(sample) float64) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		return median(v)
	}
	m := sample{
		opsS: col(func(s sample) float64 { return s.opsS }),
		p50:  time.Duration(col(func(s sample) float64 { return float64(s.p50) })),
		p99:  time.Duration(col(func(s sample) float64 { return float64(s.p99) })),
	}
	for k, x := range ss[0].extra {
		m.extra = append(m.extra, metric{x.name, col(func(s sample) float64 { return s.extra[k].value })})
	}
	return m
}

// median returns the middle value of v (the mean of the two middle ones
// for an even count); v is sorted in place.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// latencies summarises a set of latencies (sorted in place).
func latencies(d []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(d)
	return percentile(d, 0.50), percentile(d, 0.99)
}

// formatLine renders a measurement in the one-line format scripts parse:
// bench backend=.. impl=.. op=.. ops_s=.. p50_us=.. p99_us=.. [extra=..].
func formatLine(id lineID, s sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench backend=%s impl=%s op=%s ops_s=%s p50_us=%s p99_us=%s",
		id.backend, id.impl, id.op, number(s.opsS), number(micros(s.p50)), number(micros(s.p99)))
	for _, m := range s.extra {
		fmt.Fprintf(&b, " %s=%s", m.name, number(m.value))
	}
	return b.String()
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// number prints a rate with the digits that matter: whole numbers from
// 100 up, one decimal below, two below 1.
func number(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "0"
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// opFunc runs the measured operation once for worker w.
type opFunc func(ctx context.Context, w int) error

// loop is a throughput case: workers goroutines run op back to back for
// the round's duration; the first round is preceded by an unmeasured
// warm-up (connections, prepared statements, script caches, sessions).
type loop struct {
	lid         lineID
	workers     int
	dur, warmup time.Duration
	op          opFunc
	warmupDone  bool
}

func (l *loop) id() lineID { return l.lid }

func (l *loop) round(ctx context.Context) (sample, error) {
	if !l.warmupDone {
		if _, err := l.run(ctx, l.warmup); err != nil {
			return sample{}, fmt.Errorf("warm-up: %w", err)
		}
		l.warmupDone = true
	}
	return l.run(ctx, l.dur)
}

// run measures d of back-to-back operations, at least one per worker.
// Throughput is the number of completed operations over the wall time
// until the last worker stopped.
func (l *loop) run(ctx context.Context, d time.Duration) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, d+opGrace)
	defer cancel()
	lats := make([][]time.Duration, l.workers)
	var (
		stop     atomic.Bool
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for w := range l.workers {
		wg.Go(func() {
			// Each worker completes one operation even when it is first
			// scheduled after end: a loaded machine can start a goroutine
			// later than a short warm-up lasts.
			for n := 0; !stop.Load(); n++ {
				t := time.Now()
				if n > 0 && !t.Before(end) {
					return
				}
				if err := l.op(ctx, w); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("worker %d: %w", w, err) })
					stop.Store(true)
					return
				}
				lats[w] = append(lats[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return sample{}, firstErr
	}
	all := slices.Concat(lats...)
	if len(all) == 0 {
		return sample{}, errors.New("no operation completed")
	}
	s := sample{opsS: float64(len(all)) / elapsed.Seconds()}
	s.p50, s.p99 = latencies(all)
	return s, nil
}
