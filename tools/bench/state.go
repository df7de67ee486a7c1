package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/tools/internal/wait"
)

func opStateNames(n int) string { return fmt.Sprintf("state_names%d", n) }

// stateCase measures the lease state a backend keeps for names used once:
// n distinct names are each acquired and released once through the
// backend (setupWorkers at a time), then its Sweep removes the idle ones.
// ops_s is names per second taken and given back; <unit>_per_name is the
// growth of size per name before the sweep (Redis: the server's
// used_memory in bytes; SQL: rows of the lease table), and left_per_name
// after it; removed is what the sweep removed and sweep_s how long it
// took. Other clients of the server move used_memory too.
type stateCase struct {
	lid   lineID
	names int
	b     simba.Backend
	sw    simba.Sweeper
	unit  string
	size  func(ctx context.Context) (int64, error)
}

// newStateCase returns the state case of b, or nil when b cannot sweep.
func newStateCase(lid lineID, names int, b simba.Backend, unit string, size func(ctx context.Context) (int64, error)) *stateCase {
	sw, ok := b.(simba.Sweeper)
	if !ok {
		return nil
	}
	return &stateCase{lid: lid, names: names, b: b, sw: sw, unit: unit, size: size}
}

func (r *stateCase) id() lineID { return r.lid }

func (r *stateCase) round(ctx context.Context) (_ sample, err error) {
	before, err := r.size(ctx)
	if err != nil {
		return sample{}, err
	}
	g, err := r.b.OpenSession(ctx, time.Hour)
	if err != nil {
		return sample{}, err
	}
	defer func() {
		if cerr := r.b.CloseSession(context.WithoutCancel(ctx), g.ID); err == nil {
			err = cerr
		}
	}()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	start := time.Now()
	if err := parallel(ctx, r.names, setupWorkers, func(ctx context.Context, i int) error {
		name := "state." + run + "." + strconv.Itoa(i)
		res, err := r.b.Acquire(ctx, g.ID, name)
		if err != nil {
			return err
		}
		return r.b.Release(ctx, g.ID, name, res.Token)
	}); err != nil {
		return sample{}, fmt.Errorf("lock %d names: %w", r.names, err)
	}
	took := time.Since(start)
	used, err := r.size(ctx)
	if err != nil {
		return sample{}, err
	}
	if err := wait.Sleep(ctx, 1100*time.Millisecond); err != nil { // idle for the shortest sweep
		return sample{}, err
	}
	sweepStart := time.Now()
	removed, err := r.sw.Sweep(ctx, time.Second)
	if err != nil {
		return sample{}, err
	}
	sweepTook := time.Since(sweepStart)
	after, err := r.size(ctx)
	if err != nil {
		return sample{}, err
	}
	per := func(m int64) float64 { return float64(m-before) / float64(r.names) }
	return sample{
		opsS: float64(r.names) / took.Seconds(),
		extra: []metric{
			{r.unit + "_per_name", per(used)}, {"left_per_name", per(after)},
			{"removed", float64(removed)}, {"sweep_s", sweepTook.Seconds()},
		},
	}, nil
}

// usedMemory reads used_memory from INFO memory.
func usedMemory(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO memory: no used_memory")
}
