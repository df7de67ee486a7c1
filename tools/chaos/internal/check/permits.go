package check

import (
	"slices"
	"strings"
	"time"
)

// checkPermits checks the terms that are permits of a semaphore (those
// with permits set, named semaphore:slot): at no instant are more of a
// semaphore's permits valid than its number of permits, and each permit's
// token is above that of every permit of the semaphore whose validity
// ended before its Acquire call began: the backend granted it between that
// call and its start record, which a slow reply can delay past other
// permits' whole terms (permits valid at once may get their tokens in
// either order). The per-name checks cover each slot on its own.
func checkPermits(terms []*term, faults []fault, tm Timing, res *Result, phase func(int64) *Row, violate func(string, ...any)) {
	bySem := map[string][]*term{}
	for _, t := range terms {
		if i := strings.LastIndexByte(t.name, ':'); t.permits > 0 && i > 0 {
			bySem[t.name[:i]] = append(bySem[t.name[:i]], t)
		}
	}
	for sem, ts := range bySem {
		slices.SortFunc(ts, func(a, b *term) int { return compareInt(a.start, b.start) })
		for i, t := range ts {
			p := phase(t.start)
			p.PermitTerms++
			asked := t.start
			if t.asked > 0 {
				asked = min(asked, t.asked)
			}
			var valid []*term
			for _, o := range ts[:i] {
				switch {
				case o.validEnd() > t.start:
					valid = append(valid, o)
				case t.token <= o.token && o.validEnd() <= asked:
					p.TokenRegressions++
					p.MaxTokenDrop = max(p.MaxTokenDrop, o.token-t.token)
					if !res.TokensMayGoBack {
						violate("%s: permit %s token %d of %s was asked for after permit %s token %d of %s had ended",
							sem, t.name, t.token, t.node, o.name, o.token, o.node)
					}
				}
			}
			// The documented overlap of an evicted session's term counts
			// apart, as for one name, and not in MostPermits.
			over := len(valid) >= t.permits
			valid = slices.DeleteFunc(valid, func(o *term) bool { return evicted(faults, o, t, tm.EvictGrace) })
			if over && len(valid) < t.permits {
				p.EvictOverlaps++
			}
			p.MostPermits = max(p.MostPermits, len(valid)+1)
			if len(valid) < t.permits {
				continue
			}
			p.PermitOverlaps++
			if f := latest(faults, t.start); res.TokensMayGoBack && f != nil && f.victim == Suite {
				continue
			}
			violate("%s: permit %s token %d of %s began while %d permits of %d were valid, the first ending %v later",
				sem, t.name, t.token, t.node, len(valid), t.permits, time.Duration(earliestEnd(valid)-t.start))
		}
	}
}

// latest returns the last fault injected at or before t, or nil.
func latest(faults []fault, t int64) *fault {
	var last *fault
	for i := range faults {
		if faults[i].t <= t {
			last = &faults[i]
		}
	}
	return last
}

// earliestEnd returns the earliest end of validity of ts.
func earliestEnd(ts []*term) int64 {
	end := ts[0].validEnd()
	for _, t := range ts[1:] {
		end = min(end, t.validEnd())
	}
	return end
}
