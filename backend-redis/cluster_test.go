package simbaredis

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// clusterAddrs returns the node addresses of the test Redis Cluster, from
// SIMBA_TEST_REDIS_CLUSTER_URL (redis+cluster://host:port,host:port,...)
// or SIMBA_TEST_REDIS_CLUSTER_ADDRS (host:port,host:port,...). Without
// either the test is skipped: the cluster is an optional server of the
// test environment (tools/testenv/up redis-cluster).
func clusterAddrs(t testing.TB) []string {
	t.Helper()
	raw := os.Getenv("SIMBA_TEST_REDIS_CLUSTER_ADDRS")
	if u := os.Getenv("SIMBA_TEST_REDIS_CLUSTER_URL"); u != "" {
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "redis+cluster" || p.Host == "" {
			t.Fatalf("SIMBA_TEST_REDIS_CLUSTER_URL: want redis+cluster://host:port,host:port,...")
		}
		raw = p.Host
	}
	if raw == "" {
		t.Skip("SIMBA_TEST_REDIS_CLUSTER_URL is not set (eval \"$(tools/testenv/up redis-cluster)\")")
	}
	return strings.Split(raw, ",")
}

// clusterClient returns a cluster client of addrs, closed when the test
// ends.
func clusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deleteClusterKeys removes every key under prefix from every primary of
// the cluster.
func deleteClusterKeys(t testing.TB, c *redis.ClusterClient, prefix string) {
	if !strings.HasPrefix(prefix, "{simbatest-") {
		t.Errorf("refusing to delete the keys under %q, not a test prefix", prefix)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, globEscape(prefix)+"*", 1000).Iterator()
		for iter.Next(ctx) {
			node.Del(ctx, iter.Val())
		}
		return iter.Err()
	})
	if err != nil {
		t.Logf("cleaning keys under %q: %v", prefix, err)
	}
}

// TestClusterConformance runs the backend conformance suite on a Redis
// Cluster: every simulated node is its own cluster client and Backend, all
// under one hash-tagged key prefix, so that every key lives in one slot.
// With SIMBA_TEST_REDIS_CLUSTER_URL each node opens that URL with Open;
// with SIMBA_TEST_REDIS_CLUSTER_ADDRS, New over a cluster client.
func TestClusterConformance(t *testing.T) {
	addrs := clusterAddrs(t)
	url := os.Getenv("SIMBA_TEST_REDIS_CLUSTER_URL")
	prefix := testPrefix()
	raw := clusterClient(t, addrs)
	if err := raw.Ping(callCtx(t)).Err(); err != nil {
		t.Fatalf("cluster PING: %v", err)
	}
	t.Cleanup(func() { deleteClusterKeys(t, raw, prefix) })
	backendtest.Run(t, backendtest.Harness{
		New: func(t testing.TB) simba.Backend {
			var b *Backend
			var err error
			if url != "" {
				b, err = Open(callCtx(t), url, Options{KeyPrefix: prefix})
			} else {
				b, err = New(clusterClient(t, addrs), Options{KeyPrefix: prefix})
			}
			if err != nil {
				t.Fatalf("open a node's backend: %v", err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		Lease:         2 * time.Second,
		ListUnordered: true,
	})
}

// TestClusterRefusesPrefixWithoutHashTag checks, on the cluster itself,
// that a key prefix without a hash tag is refused, and that the keys of
// one operation land in one slot only with one.
func TestClusterRefusesPrefixWithoutHashTag(t *testing.T) {
	c := clusterClient(t, clusterAddrs(t))
	if _, err := New(c, Options{KeyPrefix: "simbatest:"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("New with the prefix \"simbatest:\" on a cluster = %v, want ErrInvalidOptions", err)
	}
	prefix := testPrefix()
	b, err := New(c, Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(); deleteClusterKeys(t, c, prefix) })
	g, err := b.OpenSession(callCtx(t), 2*time.Second)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	mustWin(t, b, g.ID, "slot")
	ctx := callCtx(t)
	want, err := c.ClusterKeySlot(ctx, b.sessionKey(string(g.ID))).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	for _, k := range []string{b.leaseKey("slot"), b.joinedKey(string(g.ID)), b.groupKey("g")} {
		if got, err := c.ClusterKeySlot(ctx, k).Result(); err != nil || got != want {
			t.Errorf("slot of %q = %d, %v; want %d, the slot of the session key", k, got, err, want)
		}
	}
}
