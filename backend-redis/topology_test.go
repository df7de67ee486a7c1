package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// startSentinel starts a private sentinel that monitors primary as
// "mymaster", with password as its own (requirepass) when not empty, and
// stops it when the test ends. A sentinel of a TLS primary speaks only
// TLS, with the primary's certificate, to its clients and to the primary.
// It returns the sentinel's port.
func startSentinel(t testing.TB, primary *privateServer, password string) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("redis-server not found: %v", err)
	}
	dir, port := t.TempDir(), freePort(t)
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds mymaster 1000\n", port, dir, primary.port)
	if primary.tls != nil {
		cert, key := filepath.Join(primary.dir, "cert.pem"), filepath.Join(primary.dir, "key.pem")
		conf = fmt.Sprintf("port 0\ntls-port %d\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"+
			"tls-auth-clients no\ntls-replication yes\n", port, cert, key, cert) + strings.TrimPrefix(conf, fmt.Sprintf("port %d\n", port))
	}
	if password != "" {
		conf += "requirepass " + password + "\n"
	}
	file := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, file, "--sentinel", "--logfile", filepath.Join(dir, "log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sentinel: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	c := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: password, MaxRetries: -1, TLSConfig: primary.tls})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, err := c.GetMasterAddrByName(ctx, "mymaster").Result()
		cancel()
		if err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(primary.port) {
			return port
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("sentinel on port %d does not name the primary: %v, %v\n%s", port, addr, err, log)
		}
	}
}

// TestSentinelURL: a redis+sentinel URL reaches the primary the sentinels
// name, authenticating to the sentinels with sentinel_password, and its
// min_replicas waits for the replica.
func TestSentinelURL(t *testing.T) {
	p := startServer(t)
	startReplica(t, p)
	const sentinelPassword = "sentinel-pw-7"
	port := startSentinel(t, p, sentinelPassword)
	ctx := callCtx(t)
	url := fmt.Sprintf("redis+sentinel://127.0.0.1:%d/mymaster/0?sentinel_password=%s&min_replicas=1&replica_timeout=5s", port, sentinelPassword)
	b, err := Open(ctx, url, Options{Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	defer b.Close()
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := mustWin(t, b, g.ID, "n")
	if tok, err := rawClient(t, p.url()).HGet(ctx, DefaultKeyPrefix+"lease:n", "token").Uint64(); err != nil || tok != r.Token {
		t.Fatalf("the primary's token = %d, %v; want %d", tok, err, r.Token)
	}
	if _, err := b.KeepAlive(ctx, g.ID, renewal(10*time.Second)); err != nil {
		t.Fatal(err)
	}

	// Without the sentinels' password the sentinels refuse the lookup;
	// Options.SentinelPassword gives it outside the URL.
	bare := fmt.Sprintf("redis+sentinel://127.0.0.1:%d/mymaster", port)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if b, err := Open(short, bare, Options{Logger: quiet}); err == nil {
		_ = b.Close()
		t.Fatalf("Open(%s) without the sentinels' password succeeded", bare)
	}
	ob, err := Open(ctx, bare, Options{SentinelPassword: sentinelPassword, Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s) with Options.SentinelPassword: %v", bare, err)
	}
	defer ob.Close()
	if _, err := ob.OpenSession(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
}

// startClusterNode starts a private server in cluster mode.
func startClusterNode(t testing.TB) *privateServer {
	t.Helper()
	return startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
		"--repl-diskless-sync-delay", "0")
}

// TestClusterURLWaitsOnTheKeysNode: on a cluster of two primaries, a
// redis+cluster URL opens a Backend with the hash-tagged default prefix,
// and with min_replicas=1 each acquire's WAIT goes to the primary of the
// prefix's slot, the one with a replica: sent to the other primary it
// would find no replica and fail about half the acquires.
func TestClusterURLWaitsOnTheKeysNode(t *testing.T) {
	a, c := startClusterNode(t), startClusterNode(t)
	replica := startClusterNode(t)
	ctx := callCtx(t)
	ra, rc, rr := rawClient(t, a.url()), rawClient(t, c.url()), rawClient(t, replica.url())
	if err := ra.ClusterAddSlotsRange(ctx, 0, 8191).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ClusterAddSlotsRange(ctx, 8192, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*redis.Client{rc, rr} {
		if err := n.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(a.port)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slot, err := ra.ClusterKeySlot(ctx, DefaultClusterKeyPrefix+"lease:n").Result()
	if err != nil {
		t.Fatal(err)
	}
	keys, other := a, c
	if slot >= 8192 {
		keys, other = c, a
	}
	keysID, err := rawClient(t, keys.url()).ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := rr.ClusterReplicate(ctx, keysID).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CLUSTER REPLICATE: %v", err)
		}
	}
	for _, n := range []*privateServer{a, c, replica} {
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			info, err := rawClient(t, n.url()).ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: %s, %v", n.port, info, err)
			}
		}
	}
	waitReplicas(t, keys, 1)
	waitReplicas(t, other, 0)

	url := fmt.Sprintf("redis+cluster://127.0.0.1:%d,127.0.0.1:%d?min_replicas=1&replica_timeout=5s", other.port, keys.port)
	b, err := Open(ctx, url, Options{Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	defer b.Close()
	if b.KeyPrefix() != DefaultClusterKeyPrefix {
		t.Fatalf("prefix %q, want %q", b.KeyPrefix(), DefaultClusterKeyPrefix)
	}
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		r, err := b.Acquire(ctx, g.ID, "n")
		if err != nil || !r.Won {
			t.Fatalf("acquire %d = %+v, %v; want won, its WAIT on the keys' primary", i, r, err)
		}
	}
	if _, err := b.KeepAlive(ctx, g.ID, renewal(10*time.Second)); err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	// Two replicas are more than the keys' primary has.
	two, err := Open(ctx, fmt.Sprintf("redis+cluster://127.0.0.1:%d?min_replicas=2&replica_timeout=20ms", keys.port), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	g2, err := two.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := two.Acquire(ctx, g2.ID, "m"); !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "1 of 2 replicas") {
		t.Fatalf("Acquire with min_replicas=2 = %v, want ErrNotReplicated with 1 of 2", err)
	}
	// A prefix without a hash tag is still refused.
	if _, err := Open(ctx, url, Options{KeyPrefix: "simba:", Logger: quiet}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Open with a prefix without a hash tag = %v, want ErrInvalidOptions", err)
	}
}

// TestEmptyReplicaPromoted: the sentinels promote a replica that holds
// none of Simba's keys (as a replica does that was restarted and had not
// finished its first full sync when the primary was lost): every lease
// hash and the floor are gone, and the first token on the new primary is
// still above every token the old one handed out (ADR 0020).
func TestEmptyReplicaPromoted(t *testing.T) {
	p := startServer(t)
	r := startReplica(t, p)
	port := startSentinel(t, p, "")
	ctx := callCtx(t)
	b, err := Open(ctx, fmt.Sprintf("redis+sentinel://127.0.0.1:%d/mymaster?dial_timeout=200ms", port), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var highest uint64
	for range 5 {
		g, err := b.OpenSession(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"n", "m"} {
			highest = max(highest, mustWin(t, b, g.ID, name).Token)
		}
		if err := b.CloseSession(ctx, g.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A floor too: m's hash, made idle, is swept.
	if err := rawClient(t, p.url()).HSet(ctx, DefaultKeyPrefix+"lease:m", "since", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Sweep(ctx, time.Second); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want m removed", n, err)
	}
	// Empty the replica behind the primary's back: writes to a replica
	// are not replicated.
	onReplica := rawClient(t, r.url())
	if err := onReplica.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if err := onReplica.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.stop()
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer sentinel.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		addr, err := sentinel.GetMasterAddrByName(ctx, "mymaster").Result()
		if err == nil && addr[1] == strconv.Itoa(r.port) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sentinel did not promote the replica: %v, %v", addr, err)
		}
	}
	if n, err := onReplica.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("the promoted replica holds %d keys (%v), want none", n, err)
	}
	var g simba.SessionGrant
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if g, err = b.OpenSession(ctx, 10*time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("OpenSession after the failover: %v", err)
		}
	}
	for _, name := range []string{"n", "m", "new"} {
		if tok := mustWin(t, b, g.ID, name).Token; tok <= highest {
			t.Errorf("token of %s on the promoted empty replica = %d, not above the old primary's %d", name, tok, highest)
		}
	}
}

// TestSentinelURLOverTLS: a rediss+sentinel URL speaks TLS to the
// sentinels and to the primary they name (the CA given in
// Options.TLSConfig); the URL's own TLS settings check each server's
// certificate, which a self-signed one fails, and a redis+sentinel URL
// cannot talk to TLS-only sentinels.
func TestSentinelURLOverTLS(t *testing.T) {
	p := startTLSServer(t)
	port := startSentinel(t, p, "")
	ctx := callCtx(t)
	url := fmt.Sprintf("rediss+sentinel://127.0.0.1:%d/mymaster", port)
	b, err := Open(ctx, url, Options{TLSConfig: p.tls, Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s) with the CA: %v", url, err)
	}
	defer b.Close()
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustWin(t, b, g.ID, "n")
	for _, tt := range []struct{ url, says string }{
		{url, "certificate signed by unknown authority"},
		{fmt.Sprintf("redis+sentinel://127.0.0.1:%d/mymaster", port), ""},
	} {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		b, err := Open(short, tt.url, Options{Logger: quiet})
		cancel()
		if err == nil {
			_ = b.Close()
			t.Fatalf("Open(%s) without the CA succeeded", tt.url)
		}
		t.Log(err)
		if !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Open(%s) = %v, want it to say %q", tt.url, err, tt.says)
		}
	}
}
