package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	simbaredis "github.com/simba-go/simba/backend-redis"
)

func opStateNames(n int) string { return fmt.Sprintf("state_names%d", n) }

// redisState measures the lease state Redis keeps for names used once: n
// distinct names are each acquired and released once through the backend
// (setupWorkers at a time), then Backend.Sweep removes the idle ones.
// ops_s is names per second taken and given back; bytes_per_name is the
// growth of the server's used_memory per name before the sweep, and
// left_per_name after it; removed is what the sweep removed and sweep_s
// how long it took. Other clients of the server move used_memory too.
type redisState struct {
	lid   lineID
	names int
	b     *simbaredis.Backend
	admin *redis.Client
}

func (r *redisState) id() lineID { return r.lid }

func (r *redisState) round(ctx context.Context) (_ sample, err error) {
	before, err := usedMemory(ctx, r.admin)
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
	used, err := usedMemory(ctx, r.admin)
	if err != nil {
		return sample{}, err
	}
	if err := sleepCtx(ctx, 1100*time.Millisecond); err != nil { // idle for the shortest sweep
		return sample{}, err
	}
	sweepStart := time.Now()
	removed, err := r.b.Sweep(ctx, time.Second)
	if err != nil {
		return sample{}, err
	}
	sweepTook := time.Since(sweepStart)
	after, err := usedMemory(ctx, r.admin)
	if err != nil {
		return sample{}, err
	}
	per := func(m int64) float64 { return float64(m-before) / float64(r.names) }
	return sample{
		opsS: float64(r.names) / took.Seconds(),
		extra: []metric{
			{"bytes_per_name", per(used)}, {"left_per_name", per(after)},
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
