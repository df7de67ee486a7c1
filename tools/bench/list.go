package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/tools/internal/wait"
)

// listPage is the page size of the listing case.
const listPage = 100

func opListPage(held int) string { return fmt.Sprintf("list_page%d_held%d", listPage, held) }

// listCase measures one page of a listing of the leases held
// (simba.HolderLister): one session holds n names under a prefix of the
// round's own, then the pages of 100 under that prefix are read one after
// the other to the end. p50 and p99 are of one page, ops_s is pages per
// second; walk_s is the whole walk and listed the leases it listed. The
// session is closed afterwards and, where the backend sweeps, the names'
// state is swept.
type listCase struct {
	lid  lineID
	held int
	b    simba.Backend
	l    simba.HolderLister
}

// newListCase returns the listing case of b, or nil when b cannot list.
func newListCase(backend string, held int, b simba.Backend) *listCase {
	l, ok := b.(simba.HolderLister)
	if !ok {
		return nil
	}
	return &listCase{lid: lineID{backend, implSimba, opListPage(held)}, held: held, b: b, l: l}
}

func (r *listCase) id() lineID { return r.lid }

func (r *listCase) round(ctx context.Context) (_ sample, err error) {
	g, err := r.b.OpenSession(ctx, time.Hour)
	if err != nil {
		return sample{}, err
	}
	prefix := "list." + strconv.FormatInt(time.Now().UnixNano(), 36) + "."
	defer func() {
		cctx := context.WithoutCancel(ctx)
		if cerr := r.b.CloseSession(cctx, g.ID); err == nil {
			err = cerr
		}
		if sw, ok := r.b.(simba.Sweeper); ok && err == nil {
			if err = wait.Sleep(ctx, 1100*time.Millisecond); err == nil { // idle for the shortest sweep
				_, err = sw.Sweep(cctx, time.Second)
			}
		}
	}()
	if err := parallel(ctx, r.held, setupWorkers, func(ctx context.Context, i int) error {
		res, err := r.b.Acquire(ctx, g.ID, fmt.Sprintf("%s%07d", prefix, i))
		if err == nil && !res.Won {
			err = fmt.Errorf("%s%07d not won", prefix, i)
		}
		return err
	}); err != nil {
		return sample{}, fmt.Errorf("hold %d names: %w", r.held, err)
	}
	var pages []time.Duration
	listed := 0
	q := simba.ListQuery{Prefix: prefix, Limit: listPage}
	start := time.Now()
	for {
		t := time.Now()
		p, err := r.l.ListHolders(ctx, q)
		if err != nil {
			return sample{}, fmt.Errorf("page %d: %w", len(pages)+1, err)
		}
		pages = append(pages, time.Since(t))
		listed += len(p.Leases)
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	walk := time.Since(start)
	if listed < r.held {
		return sample{}, fmt.Errorf("the walk listed %d leases of the %d held", listed, r.held)
	}
	s := sample{opsS: float64(len(pages)) / walk.Seconds()}
	s.p50, s.p99 = latencies(pages)
	s.extra = []metric{{"walk_s", walk.Seconds()}, {"listed", float64(listed)}}
	return s, nil
}
