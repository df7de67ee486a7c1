package topology

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// The slots CLUSTER KEYSLOT of Redis 7.0 gives for these keys.
func TestRedisHashSlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo":                  12182,
		"somekey":              11058,
		"123456789":            12739,
		"{simba}:":             4356,
		"{user1000}.following": 3443,
		"a{}b":                 13694, // an empty tag: the whole key
	} {
		if got := redisHashSlot(key); got != want {
			t.Errorf("redisHashSlot(%q) = %d, want %d", key, got, want)
		}
	}
}

// redisTopologies gates the tests that start servers: they run when
// SIMBA_TEST_TOPOLOGY_REDIS is set.
func redisTopologies(t *testing.T) {
	if os.Getenv("SIMBA_TEST_TOPOLOGY_REDIS") == "" {
		t.Skip("SIMBA_TEST_TOPOLOGY_REDIS is not set: the Redis topologies are not started")
	}
}

// injectEach starts a topology, injects each of its faults once, checks
// that an unknown fault is refused, and stops it.
func injectEach(t *testing.T, start func(ctx context.Context, dir string) (*Redis, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topo, err := start(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer func() {
		if err := topo.Down(context.Background()); err != nil {
			t.Errorf("Down: %v", err)
		}
	}()
	for _, f := range topo.Faults() {
		before := time.Now()
		if err := topo.Inject(ctx, f); err != nil {
			t.Fatalf("Inject(%s): %v", f, err)
		}
		if at := topo.FaultAt(); at.Before(before) || at.After(time.Now()) {
			t.Errorf("Inject(%s): FaultAt %v outside the call", f, at)
		}
		t.Logf("%s: %v", f, time.Since(before).Round(time.Millisecond))
	}
	if err := topo.Inject(ctx, LeaderKill); !errors.Is(err, ErrUnknownFault) {
		t.Errorf("Inject(%s) = %v, want ErrUnknownFault", LeaderKill, err)
	}
}

func TestRedisSentinelFaults(t *testing.T) {
	redisTopologies(t)
	injectEach(t, func(ctx context.Context, dir string) (*Redis, error) {
		return StartRedisSentinel(ctx, dir, RedisOptions{})
	})
}

func TestRedisClusterFaults(t *testing.T) {
	redisTopologies(t)
	injectEach(t, func(ctx context.Context, dir string) (*Redis, error) {
		return StartRedisCluster(ctx, dir, RedisOptions{})
	})
}
