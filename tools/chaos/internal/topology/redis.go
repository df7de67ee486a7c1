package topology

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/tools/chaos/internal/servers"
	"github.com/simba-go/simba/tools/internal/wait"
)

//go:embed redis.sh
var redisScript []byte

var _ Topology = (*Redis)(nil)

// RedisOptions are the settings of a Redis topology. The zero value is
// usable.
type RedisOptions struct {
	// Master is the name the sentinels monitor the primary under.
	// Default "simba".
	Master string
	// KeyPrefix is the key prefix the nodes use, with a hash tag: on a
	// cluster, the faults hit the primary that owns its slot. Default
	// "{simba}:", the prefix a Backend opened from a redis+cluster:// URL
	// takes (simbaredis.DefaultClusterKeyPrefix).
	KeyPrefix string
	// DownAfter is the sentinels' down-after-milliseconds, and the
	// cluster's node timeout. Default 1s.
	DownAfter time.Duration
	// MinReplicas, when above 0, is the min_replicas parameter of URL:
	// every acquire and keep-alive waits for that many replicas
	// (simbaredis.Options.MinReplicas), and Name ends in "-wait".
	MinReplicas int
}

func (o RedisOptions) withDefaults() RedisOptions {
	if o.Master == "" {
		o.Master = "simba"
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = "{simba}:"
	}
	if o.DownAfter <= 0 {
		o.DownAfter = time.Second
	}
	return o
}

// redisProbeKey is the key Inject writes to check that a primary accepts
// writes. On a cluster it carries the prefix's hash tag.
const redisProbeKey = "simba-topology:probe"

// redisMarkerKey is written on the primary before the empty-promotion fault
// restarts the replica; a promoted node without it never got the
// primary's data.
const redisMarkerKey = "simba-topology:marker"

// redisInjectBound is how long one fault may take before Inject gives up.
const redisInjectBound = 90 * time.Second

// Redis is a Redis Sentinel or Redis Cluster topology on loopback.
type Redis struct {
	opts    RedisOptions
	cluster bool
	script  servers.Script
	dir     string // holds a state directory per process

	servers   []redisProc // the data servers
	sentinels []redisProc // none on a cluster

	mu      sync.Mutex
	faultAt time.Time // the disruptive moment of the last fault
	turn    int       // rotates the sentinel the partition fault cuts off
}

type redisProc struct {
	name string
	port int
}

func (p redisProc) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// StartRedisSentinel starts a primary, a replica of it and three
// sentinels monitoring it, all without persistence, under dir. It returns
// once the replica is in sync and every sentinel knows the replica.
func StartRedisSentinel(ctx context.Context, dir string, opts RedisOptions) (*Redis, error) {
	return startRedis(ctx, dir, opts, false)
}

// StartRedisCluster starts a Redis Cluster of three primaries with one
// replica each, without persistence, under dir. It returns once every
// node reports the cluster ok and every replica is in sync.
func StartRedisCluster(ctx context.Context, dir string, opts RedisOptions) (*Redis, error) {
	return startRedis(ctx, dir, opts, true)
}

// startRedis starts a Redis Cluster, or a primary with a replica and
// sentinels, under dir; on an error it takes down what it started.
func startRedis(ctx context.Context, dir string, opts RedisOptions, cluster bool) (*Redis, error) {
	t, err := newRedis(dir, opts, cluster)
	if err != nil {
		return nil, err
	}
	start := t.startSentinel
	if cluster {
		start = t.startCluster
	}
	if err := start(ctx); err != nil {
		return nil, errors.Join(err, t.Down(context.WithoutCancel(ctx)))
	}
	return t, nil
}

func newRedis(dir string, opts RedisOptions, cluster bool) (*Redis, error) {
	sh, err := writeScript(dir, "redis.sh", redisScript)
	if err != nil {
		return nil, err
	}
	t := &Redis{opts: opts.withDefaults(), cluster: cluster, script: sh, dir: filepath.Join(dir, "state")}
	t.script.Timeout = 2 * time.Minute
	t.script.Env = append(os.Environ(), "SIMBA_TESTENV_DIR="+t.dir)
	n, sentinels, prefix := 2, 3, "redis"
	if cluster {
		n, sentinels, prefix = 6, 0, "node"
	}
	ports, err := freePorts(n + sentinels)
	if err != nil {
		return nil, err
	}
	for i, port := range ports[:n] {
		t.servers = append(t.servers, redisProc{name: fmt.Sprintf("%s-%d", prefix, i), port: port})
	}
	for i, port := range ports[n:] {
		t.sentinels = append(t.sentinels, redisProc{name: fmt.Sprintf("sentinel-%d", i), port: port})
	}
	return t, nil
}

// serverArgs are the settings of every data server: diskless full syncs
// that start at once (the empty-promotion fault delays them itself).
func (t *Redis) serverArgs() []string {
	args := []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	if t.cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(t.opts.DownAfter.Milliseconds(), 10))
	}
	return args
}

// startReplica starts p, empty, as a replica of primary and waits until it
// is in sync.
func (t *Redis) startReplica(ctx context.Context, p, primary redisProc) error {
	if err := t.startServer(ctx, p, &primary); err != nil {
		return err
	}
	return t.awaitSynced(ctx, p, primary)
}

func (t *Redis) startServer(ctx context.Context, p redisProc, replicaOf *redisProc) error {
	args := []string{"server", p.name, strconv.Itoa(p.port)}
	args = append(args, t.serverArgs()...)
	if replicaOf != nil {
		args = append(args, "--replicaof", "127.0.0.1", strconv.Itoa(replicaOf.port))
	}
	return t.run(ctx, args...)
}

func (t *Redis) startSentinel(ctx context.Context) error {
	primary, replica := t.servers[0], t.servers[1]
	if err := t.startServer(ctx, primary, nil); err != nil {
		return err
	}
	if err := t.startReplica(ctx, replica, primary); err != nil {
		return err
	}
	for _, s := range t.sentinels {
		if err := t.run(ctx, "sentinel", s.name, strconv.Itoa(s.port), strconv.Itoa(primary.port), t.opts.Master,
			strconv.FormatInt(t.opts.DownAfter.Milliseconds(), 10), strconv.FormatInt(4*t.opts.DownAfter.Milliseconds(), 10)); err != nil {
			return err
		}
	}
	// A failover needs every sentinel to know the replica and the others.
	return redisPoll(ctx, redisInjectBound, "the sentinels to know the replica and each other", func(ctx context.Context) (bool, error) {
		for _, s := range t.sentinels {
			m, err := t.sentinelMaster(ctx, s)
			if err != nil {
				return false, err
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
				return false, fmt.Errorf("%s: %s replicas, %s other sentinels", s.name, m["num-slaves"], m["num-other-sentinels"])
			}
		}
		return true, nil
	})
}

func (t *Redis) startCluster(ctx context.Context) error {
	args := []string{"cluster-create"}
	for _, p := range t.servers {
		if err := t.startServer(ctx, p, nil); err != nil {
			return err
		}
		args = append(args, strconv.Itoa(p.port))
	}
	if err := t.run(ctx, args...); err != nil {
		return err
	}
	return t.awaitCluster(ctx)
}

// Name is "redis-sentinel" or "redis-cluster".
func (t *Redis) Name() string {
	name := "redis-sentinel"
	if t.cluster {
		name = "redis-cluster"
	}
	if t.opts.MinReplicas > 0 {
		name += "-wait"
	}
	return name
}

// Backend is "redis".
func (t *Redis) Backend() string { return "redis" }

// URL is redis+sentinel://SENTINELS/MASTER or redis+cluster://NODES, the
// host:port lists comma-separated.
func (t *Redis) URL() string {
	u := "redis+sentinel://" + strings.Join(t.SentinelAddrs(), ",") + "/" + t.opts.Master
	if t.cluster {
		u = "redis+cluster://" + strings.Join(t.ClusterAddrs(), ",")
	}
	if t.opts.MinReplicas > 0 {
		u += "?min_replicas=" + strconv.Itoa(t.opts.MinReplicas)
	}
	return u
}

// SentinelAddrs lists the sentinels' host:port addresses.
func (t *Redis) SentinelAddrs() []string { return redisAddrs(t.sentinels) }

// ClusterAddrs lists every data server's host:port address.
func (t *Redis) ClusterAddrs() []string { return redisAddrs(t.servers) }

// Master is the name the sentinels monitor the primary under.
func (t *Redis) Master() string { return t.opts.Master }

// KeyPrefix is the key prefix the faults of a cluster aim at.
func (t *Redis) KeyPrefix() string { return t.opts.KeyPrefix }

func redisAddrs(ps []redisProc) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.addr()
	}
	return out
}

// Faults lists the faults of the topology.
func (t *Redis) Faults() []string {
	if t.cluster {
		return []string{PrimaryKill, Failover}
	}
	return []string{PrimaryKill, Failover, SentinelPartition, RollingRestart, EmptyPromotion}
}

// TokensMayGoBack is false: replication is asynchronous, but tokens
// come from the server's clock (ADR 0020), so that even a promoted
// replica that lost writes, or an empty one, hands out greater tokens
// (one host here: no clock skew between the servers).
func (t *Redis) TokensMayGoBack() bool { return false }

// FaultAt is the disruptive moment of the last fault injected: the
// SIGKILL, the failover command, the sentinel's pause, the first restart.
func (t *Redis) FaultAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.faultAt
}

func (t *Redis) mark() {
	t.mu.Lock()
	t.faultAt = time.Now()
	t.mu.Unlock()
}

// Inject injects fault and returns once a primary accepts writes again,
// every server runs and every replica is in sync.
func (t *Redis) Inject(ctx context.Context, fault string) error {
	ctx, cancel := context.WithTimeout(ctx, redisInjectBound)
	defer cancel()
	var err error
	switch {
	case t.cluster && fault == PrimaryKill:
		err = t.clusterKill(ctx)
	case t.cluster && fault == Failover:
		err = t.clusterFailover(ctx)
	case t.cluster:
		return fmt.Errorf("%w: %s on %s", ErrUnknownFault, fault, t.Name())
	case fault == PrimaryKill:
		err = t.sentinelKill(ctx)
	case fault == Failover:
		err = t.sentinelFailover(ctx, true)
	case fault == SentinelPartition:
		err = t.sentinelPartition(ctx)
	case fault == RollingRestart:
		err = t.rollingRestart(ctx)
	case fault == EmptyPromotion:
		err = t.emptyPromotion(ctx)
	default:
		return fmt.Errorf("%w: %s on %s", ErrUnknownFault, fault, t.Name())
	}
	if err != nil {
		return fmt.Errorf("topology: %s on %s: %w", fault, t.Name(), err)
	}
	return nil
}

// Down stops every process and deletes their data.
func (t *Redis) Down(ctx context.Context) error {
	var errs []error
	for _, p := range append(append([]redisProc(nil), t.sentinels...), t.servers...) {
		if err := t.run(ctx, "wipe", p.name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ---------------------------------------------------------------- sentinel

// sentinelKill kills the primary, waits for the sentinels' new one, and
// starts the killed server again, empty, as its replica.
func (t *Redis) sentinelKill(ctx context.Context) error {
	old, err := t.currentPrimary(ctx)
	if err != nil {
		return err
	}
	next, err := t.killPrimary(ctx, old)
	if err != nil {
		return err
	}
	return t.startReplica(ctx, old, next)
}

// sentinelFailover asks a sentinel for a failover and waits until the old
// primary is a replica in sync of the new one.
func (t *Redis) sentinelFailover(ctx context.Context, mark bool) error {
	old, err := t.currentPrimary(ctx)
	if err != nil {
		return err
	}
	s := t.sentinels[0]
	// A sentinel refuses while a failover runs or the replica is not yet
	// fit; ask again until it accepts.
	err = redisPoll(ctx, 30*time.Second, "a sentinel to accept SENTINEL FAILOVER", func(ctx context.Context) (bool, error) {
		if mark {
			t.mark()
		}
		err := t.do(ctx, s, "sentinel", "failover", t.opts.Master).Err()
		return err == nil, err
	})
	if err != nil {
		return err
	}
	next, err := t.awaitNewPrimary(ctx, old)
	if err != nil {
		return err
	}
	return t.awaitSynced(ctx, old, next)
}

// sentinelPartition cuts one sentinel off (it is paused: it neither
// answers nor watches) for four times down-after, then lets it go on.
func (t *Redis) sentinelPartition(ctx context.Context) error {
	t.mu.Lock()
	s := t.sentinels[t.turn%len(t.sentinels)]
	t.turn++
	t.mu.Unlock()
	pid, err := t.pid(s)
	if err != nil {
		return err
	}
	t.mark()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", s.name, err)
	}
	sleepErr := wait.Sleep(ctx, 4*t.opts.DownAfter)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s: %w", s.name, err)
	}
	if sleepErr != nil {
		return sleepErr
	}
	primary, err := t.currentPrimary(ctx)
	if err != nil {
		return err
	}
	return t.awaitWritable(ctx, primary)
}

// rollingRestart restarts every process in turn, the way an operator
// upgrades without losing data: each sentinel, then the replica (empty; it
// resyncs), then a failover to it, then the old primary (empty, as its
// replica).
func (t *Redis) rollingRestart(ctx context.Context) error {
	t.mark()
	for _, s := range t.sentinels {
		if err := t.run(ctx, "stop", s.name); err != nil {
			return err
		}
		if err := t.run(ctx, "sentinel-resume", s.name, strconv.Itoa(s.port)); err != nil {
			return err
		}
	}
	primary, err := t.currentPrimary(ctx)
	if err != nil {
		return err
	}
	replica := t.other(primary)
	if err := t.run(ctx, "stop", replica.name); err != nil {
		return err
	}
	if err := t.startReplica(ctx, replica, primary); err != nil {
		return err
	}
	if err := t.awaitSentinelsSeeReplica(ctx); err != nil {
		return err
	}
	if err := t.sentinelFailover(ctx, false); err != nil {
		return err
	}
	if err := t.run(ctx, "stop", primary.name); err != nil {
		return err
	}
	if err := t.startReplica(ctx, primary, replica); err != nil {
		return err
	}
	return t.awaitSentinelsSeeReplica(ctx)
}

// emptyPromotion restarts the replica empty and kills the primary while
// the replica's first full sync waits for the primary's diskless-sync
// delay, so that the sentinels promote a node that holds no key. It checks
// that the promoted node lacks a key written on the primary before.
func (t *Redis) emptyPromotion(ctx context.Context) error {
	primary, err := t.currentPrimary(ctx)
	if err != nil {
		return err
	}
	replica := t.other(primary)
	if err := t.do(ctx, primary, "config", "set", "repl-diskless-sync-delay", "30").Err(); err != nil {
		return fmt.Errorf("delay the full syncs of %s: %w", primary.name, err)
	}
	if err := t.do(ctx, primary, "set", redisMarkerKey, time.Now().String()).Err(); err != nil {
		return fmt.Errorf("write the marker on %s: %w", primary.name, err)
	}
	if err := t.kill(ctx, replica); err != nil {
		return err
	}
	if err := t.startServer(ctx, replica, &primary); err != nil {
		return err
	}
	err = redisPoll(ctx, 20*time.Second, "the replica's full sync to wait for the primary", func(ctx context.Context) (bool, error) {
		info, err := t.info(ctx, replica)
		if err != nil {
			return false, err
		}
		// The replica waits for the primary's answer to its PSYNC, which
		// comes when the delayed transfer starts.
		if info["master_link_status"] != "down" {
			return false, fmt.Errorf("%s: link %q", replica.name, info["master_link_status"])
		}
		n, err := t.do(ctx, replica, "dbsize").Int64()
		if err != nil || n != 0 {
			return false, fmt.Errorf("%s: dbsize %d, %w", replica.name, n, err)
		}
		pinfo, err := t.info(ctx, primary)
		if err != nil {
			return false, err
		}
		for k, v := range pinfo {
			if strings.HasPrefix(k, "slave") && strings.Contains(v, "port="+strconv.Itoa(replica.port)+",") &&
				strings.Contains(v, "state=wait_bgsave") {
				return true, nil
			}
		}
		return false, fmt.Errorf("%s does not list %s waiting for its full sync", primary.name, replica.name)
	})
	if err != nil {
		return err
	}
	// The sentinels must see the restarted replica before its peer dies.
	if err := t.awaitSentinelsSeeReplica(ctx); err != nil {
		return err
	}
	next, err := t.killPrimary(ctx, primary)
	if err != nil {
		return err
	}
	if next != replica {
		return fmt.Errorf("the sentinels promoted %s, want %s", next.name, replica.name)
	}
	n, err := t.do(ctx, next, "exists", redisMarkerKey).Int64()
	if err != nil {
		return fmt.Errorf("read the marker on %s: %w", next.name, err)
	}
	if n != 0 {
		return fmt.Errorf("the promoted %s holds the marker: it was not empty", next.name)
	}
	if err := t.startServer(ctx, primary, &next); err != nil {
		return err
	}
	return t.awaitSynced(ctx, primary, next)
}

// awaitSentinelsSeeReplica waits until every sentinel lists one replica
// that is not down.
func (t *Redis) awaitSentinelsSeeReplica(ctx context.Context) error {
	return redisPoll(ctx, 30*time.Second, "every sentinel to see the replica up", func(ctx context.Context) (bool, error) {
		for _, s := range t.sentinels {
			reps, err := t.do(ctx, s, "sentinel", "replicas", t.opts.Master).Slice()
			if err != nil {
				return false, err
			}
			up := 0
			for _, r := range reps {
				m := redisPairs(r)
				if !strings.Contains(m["flags"], "down") && !strings.Contains(m["flags"], "disconnected") {
					up++
				}
			}
			if up != 1 {
				return false, fmt.Errorf("%s sees %d replicas up", s.name, up)
			}
		}
		return true, nil
	})
}

// currentPrimary is the primary a majority of the sentinels report.
func (t *Redis) currentPrimary(ctx context.Context) (redisProc, error) {
	var p redisProc
	err := redisPoll(ctx, 30*time.Second, "a majority of sentinels to agree on the primary", func(ctx context.Context) (bool, error) {
		var err error
		p, err = t.majorityPrimary(ctx)
		return err == nil, err
	})
	return p, err
}

func (t *Redis) majorityPrimary(ctx context.Context) (redisProc, error) {
	votes := map[string]int{}
	var errs []error
	for _, s := range t.sentinels {
		sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		a, err := t.do(sctx, s, "sentinel", "get-master-addr-by-name", t.opts.Master).StringSlice()
		cancel()
		if err != nil || len(a) != 2 {
			errs = append(errs, fmt.Errorf("%s: %v %w", s.name, a, err))
			continue
		}
		votes[net.JoinHostPort(a[0], a[1])]++
	}
	for a, n := range votes {
		if 2*n > len(t.sentinels) {
			for _, p := range t.servers {
				if p.addr() == a {
					return p, nil
				}
			}
			return redisProc{}, fmt.Errorf("the sentinels report an unknown primary %s", a)
		}
	}
	return redisProc{}, fmt.Errorf("no majority among %v: %w", votes, errors.Join(errs...))
}

// killPrimary kills the primary old and returns the primary the sentinels
// promote in its place, once it accepts writes.
func (t *Redis) killPrimary(ctx context.Context, old redisProc) (redisProc, error) {
	if err := t.kill(ctx, old); err != nil {
		return redisProc{}, err
	}
	return t.awaitNewPrimary(ctx, old)
}

// awaitNewPrimary waits until a majority of the sentinels report a
// primary other than old and it accepts writes.
func (t *Redis) awaitNewPrimary(ctx context.Context, old redisProc) (redisProc, error) {
	var p redisProc
	err := redisPoll(ctx, redisInjectBound, "the sentinels to report a new primary that accepts writes", func(ctx context.Context) (bool, error) {
		var err error
		p, err = t.majorityPrimary(ctx)
		if err != nil {
			return false, err
		}
		if p == old {
			return false, fmt.Errorf("still %s", old.name)
		}
		return t.writable(ctx, p)
	})
	return p, err
}

func (t *Redis) other(p redisProc) redisProc {
	for _, q := range t.servers {
		if q != p {
			return q
		}
	}
	return p
}

// ---------------------------------------------------------------- cluster

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	primary, failed  bool
	slots            [][2]int
}

func (n clusterNode) owns(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

func (t *Redis) clusterNodes(ctx context.Context, via redisProc) ([]clusterNode, error) {
	s, err := t.do(ctx, via, "cluster", "nodes").Text()
	if err != nil {
		return nil, err
	}
	var out []clusterNode
	for line := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := clusterNode{id: f[0], addr: strings.SplitN(f[1], "@", 2)[0], master: f[3],
			primary: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, [2]int{a, b})
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// slotOwner is the primary that owns the slot of the key prefix, and its
// replica, as the first answering server sees them.
func (t *Redis) slotOwner(ctx context.Context, skip redisProc) (primary, replica redisProc, err error) {
	slot := redisHashSlot(t.opts.KeyPrefix)
	for _, via := range t.servers {
		if via == skip {
			continue
		}
		nodes, err := t.clusterNodes(ctx, via)
		if err != nil {
			continue
		}
		var pid string
		for _, n := range nodes {
			if n.primary && !n.failed && n.owns(slot) {
				pid = n.id
				primary = t.byAddr(n.addr)
			}
		}
		for _, n := range nodes {
			if pid != "" && n.master == pid && !n.failed {
				replica = t.byAddr(n.addr)
			}
		}
		if primary.port == 0 || replica.port == 0 {
			return primary, replica, fmt.Errorf("%s: slot %d has primary %q and replica %q", via.name, slot, primary.name, replica.name)
		}
		return primary, replica, nil
	}
	return primary, replica, errors.New("no cluster node answers")
}

func (t *Redis) byAddr(a string) redisProc {
	for _, p := range t.servers {
		if p.addr() == a {
			return p
		}
	}
	return redisProc{}
}

// clusterKill kills the primary of the prefix's slot, waits until its
// replica took over and the cluster is ok, and starts the killed node
// again, empty but with its node identity, so that it rejoins as the new
// primary's replica.
func (t *Redis) clusterKill(ctx context.Context) error {
	old, replica, err := t.slotOwner(ctx, redisProc{})
	if err != nil {
		return err
	}
	if err := t.kill(ctx, old); err != nil {
		return err
	}
	if err := t.awaitSlotOwner(ctx, replica, old); err != nil {
		return err
	}
	if err := t.startServer(ctx, old, nil); err != nil {
		return err
	}
	if err := t.awaitSynced(ctx, old, replica); err != nil {
		return err
	}
	return t.awaitCluster(ctx)
}

// clusterFailover runs CLUSTER FAILOVER on the replica of the prefix's
// slot and waits until the roles are swapped and the old primary is in
// sync.
func (t *Redis) clusterFailover(ctx context.Context) error {
	old, replica, err := t.slotOwner(ctx, redisProc{})
	if err != nil {
		return err
	}
	t.mark()
	if err := t.do(ctx, replica, "cluster", "failover").Err(); err != nil {
		return fmt.Errorf("CLUSTER FAILOVER on %s: %w", replica.name, err)
	}
	if err := t.awaitSlotOwner(ctx, replica, redisProc{}); err != nil {
		return err
	}
	if err := t.awaitSynced(ctx, old, replica); err != nil {
		return err
	}
	return t.awaitCluster(ctx)
}

// awaitSlotOwner waits until every running node sees want own the
// prefix's slot and want accepts writes.
func (t *Redis) awaitSlotOwner(ctx context.Context, want, dead redisProc) error {
	slot := redisHashSlot(t.opts.KeyPrefix)
	return redisPoll(ctx, redisInjectBound, "the replica to take the slot over", func(ctx context.Context) (bool, error) {
		for _, via := range t.servers {
			if via == dead {
				continue
			}
			nodes, err := t.clusterNodes(ctx, via)
			if err != nil {
				return false, err
			}
			ok := false
			for _, n := range nodes {
				if n.primary && n.owns(slot) && n.addr == want.addr() {
					ok = true
				}
			}
			if !ok {
				return false, fmt.Errorf("%s does not see %s own slot %d yet", via.name, want.name, slot)
			}
		}
		return t.writable(ctx, want)
	})
}

// awaitCluster waits until every node reports the cluster ok and every
// replica is in sync.
func (t *Redis) awaitCluster(ctx context.Context) error {
	return redisPoll(ctx, redisInjectBound, "the cluster to be ok with every replica in sync", func(ctx context.Context) (bool, error) {
		for _, p := range t.servers {
			s, err := t.do(ctx, p, "cluster", "info").Text()
			if err != nil {
				return false, err
			}
			if !strings.Contains(s, "cluster_state:ok") {
				return false, fmt.Errorf("%s: cluster not ok", p.name)
			}
			info, err := t.info(ctx, p)
			if err != nil {
				return false, err
			}
			if info["role"] == "slave" && info["master_link_status"] != "up" {
				return false, fmt.Errorf("%s: replica link %s", p.name, info["master_link_status"])
			}
		}
		return true, nil
	})
}

// hashSlot is the Redis Cluster slot of key: CRC16 of its hash tag (or of
// the whole key) modulo 16384.
func redisHashSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := range len(key) {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// ---------------------------------------------------------------- servers

// awaitSynced waits until replica is a replica of primary with its link
// up (its full sync done).
func (t *Redis) awaitSynced(ctx context.Context, replica, primary redisProc) error {
	return redisPoll(ctx, redisInjectBound, replica.name+" to be in sync with "+primary.name, func(ctx context.Context) (bool, error) {
		info, err := t.info(ctx, replica)
		if err != nil {
			return false, err
		}
		if info["role"] != "slave" || info["master_port"] != strconv.Itoa(primary.port) || info["master_link_status"] != "up" {
			return false, fmt.Errorf("%s: role %s of port %s, link %s", replica.name, info["role"], info["master_port"], info["master_link_status"])
		}
		return true, nil
	})
}

func (t *Redis) awaitWritable(ctx context.Context, p redisProc) error {
	return redisPoll(ctx, redisInjectBound, p.name+" to accept writes", t.writableFunc(p))
}

func (t *Redis) writableFunc(p redisProc) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) { return t.writable(ctx, p) }
}

func (t *Redis) writable(ctx context.Context, p redisProc) (bool, error) {
	key := redisProbeKey
	if t.cluster {
		key = t.opts.KeyPrefix + "topology-probe"
	}
	if err := t.do(ctx, p, "set", key, "1", "px", "10000").Err(); err != nil {
		return false, fmt.Errorf("%s: %w", p.name, err)
	}
	return true, nil
}

func (t *Redis) info(ctx context.Context, p redisProc) (map[string]string, error) {
	s, err := t.do(ctx, p, "info", "replication").Text()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

func (t *Redis) sentinelMaster(ctx context.Context, s redisProc) (map[string]string, error) {
	r, err := t.do(ctx, s, "sentinel", "master", t.opts.Master).Slice()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return redisPairsOf(r), nil
}

// pairs reads a flat field-value reply into a map.
func redisPairs(v any) map[string]string {
	s, _ := v.([]any)
	return redisPairsOf(s)
}

func redisPairsOf(s []any) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(s); i += 2 {
		m[fmt.Sprint(s[i])] = fmt.Sprint(s[i+1])
	}
	return m
}

// do sends one command to p on a connection of its own.
func (t *Redis) do(ctx context.Context, p redisProc, args ...any) *redis.Cmd {
	c := redis.NewClient(&redis.Options{
		Addr: p.addr(), Protocol: 2, DisableIdentity: true, MaxRetries: -1, PoolSize: 1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
	})
	defer c.Close()
	cmd := c.Do(ctx, args...)
	_ = cmd.Err()
	return cmd
}

// kill sends SIGKILL to p, marking the moment, and waits until it and any
// stray of it are gone.
func (t *Redis) kill(ctx context.Context, p redisProc) error {
	pid, err := t.pid(p)
	if err != nil {
		return err
	}
	t.mark()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	return t.run(ctx, "kill", p.name)
}

func (t *Redis) pid(p redisProc) (int, error) {
	pid, err := servers.ReadPid(filepath.Join(t.dir, p.name, "pid"))
	if err != nil {
		return 0, fmt.Errorf("pid of %s: %w", p.name, err)
	}
	return pid, nil
}

func (t *Redis) run(ctx context.Context, args ...string) error {
	_, err := t.script.Run(ctx, args...)
	return err
}

// redisPoll calls f every 50ms until it reports true, or fails with f's last
// error once limit has passed or ctx ended.
func redisPoll(ctx context.Context, limit time.Duration, what string, f func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		ok, err := f(ctx)
		if ok {
			return nil
		}
		last = err
		if wait.Sleep(ctx, 50*time.Millisecond) != nil {
			if last == nil {
				return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
			}
			return fmt.Errorf("waiting for %s: %w (last: %w)", what, ctx.Err(), last)
		}
	}
}
