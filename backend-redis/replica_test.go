package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// startReplica starts a private server replicating primary and waits
// until the primary counts it as a connected replica in sync.
func startReplica(t testing.TB, primary *privateServer) *privateServer {
	t.Helper()
	// A full sync otherwise waits 5s for more replicas to share it.
	if err := rawClient(t, primary.url()).ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	r := startServer(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	waitReplicas(t, primary, 1)
	return r
}

// waitReplicas waits until primary reports n connected replicas online.
func waitReplicas(t testing.TB, primary *privateServer, n int) {
	t.Helper()
	raw := rawClient(t, primary.url())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := raw.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:"+strconv.Itoa(n)+"\r\n") &&
			strings.Count(info, "state=online") == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("primary on port %d has not %d replicas online: %s, %v", primary.port, n, info, err)
		}
	}
}

// TestMinReplicasAcknowledged: with a replica in sync, an Acquire and a
// KeepAlive under MinReplicas 1 succeed, and the replica holds the term
// the moment Acquire returns (WAIT came back after its acknowledgement).
func TestMinReplicasAcknowledged(t *testing.T) {
	p := startServer(t)
	r := startReplica(t, p)
	// A timeout long enough for a replica starved of CPU: the test is
	// about a replica that answers.
	b := openBackend(t, p.url(), Options{MinReplicas: 1, ReplicaTimeout: 5 * time.Second, Logger: quiet})
	onReplica := rawClient(t, r.url())
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held := make(map[string]uint64)
	for i := range 20 {
		name := fmt.Sprint("n", i)
		won := mustWin(t, b, g.ID, name)
		held[name] = won.Token
		tok, err := onReplica.HGet(ctx, b.KeyPrefix()+"lease:"+name, "token").Result()
		if err != nil || tok != strconv.FormatUint(won.Token, 10) {
			t.Fatalf("the replica's token of %s = %q, %v right after Acquire; want %d", name, tok, err, won.Token)
		}
	}
	if reply, err := b.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: 10 * time.Second, Held: held}); err != nil || len(reply.Lost) != 0 {
		t.Fatalf("KeepAlive = %+v, %v; want nothing lost", reply, err)
	}
}

// TestMinReplicasMissing: with fewer replicas than MinReplicas, an
// Acquire that won fails with ErrNotReplicated within about the replica
// timeout and gives the term back (another session wins it at once), and
// a KeepAlive fails with ErrNotReplicated; one that lost still reports
// the lease held. Once the replica is there, both succeed.
func TestMinReplicasMissing(t *testing.T) {
	p := startServer(t)
	b := openBackend(t, p.url(), Options{MinReplicas: 1, ReplicaTimeout: 50 * time.Millisecond, Logger: quiet})
	plain := openBackend(t, p.url(), Options{KeyPrefix: b.KeyPrefix(), Logger: quiet})
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.Acquire(ctx, g.ID, "n")
	took := time.Since(start)
	if !errors.Is(err, ErrNotReplicated) || errors.Is(err, simba.ErrSessionExpired) {
		t.Fatalf("Acquire without a replica = %v, want ErrNotReplicated", err)
	}
	if want := "0 of 1 replicas acknowledged the write within 50ms; the term was given back"; !strings.Contains(err.Error(), want) {
		t.Errorf("Acquire error %q, want it to say %q", err, want)
	}
	if took < 50*time.Millisecond || took > 2*time.Second {
		t.Errorf("Acquire took %v, want about the 50ms replica timeout", took)
	}
	if h, ok, err := b.Holder(ctx, "n"); err != nil || ok {
		t.Fatalf("Holder after a term given back = %+v, %v, %v; want nobody", h, ok, err)
	}
	other, err := plain.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	theirs := mustWin(t, plain, other.ID, "n")
	if r, err := b.Acquire(ctx, g.ID, "n"); err != nil || r.Won {
		t.Fatalf("Acquire of a lease another session holds = %+v, %v; want lost, no error", r, err)
	}
	if _, err := b.KeepAlive(ctx, g.ID, renewal(10*time.Second)); !errors.Is(err, ErrNotReplicated) ||
		!strings.Contains(err.Error(), "the session was renewed on the primary only") {
		t.Fatalf("KeepAlive without a replica = %v, want ErrNotReplicated", err)
	}
	if err := plain.Release(ctx, other.ID, "n", theirs.Token); err != nil {
		t.Fatal(err)
	}

	startReplica(t, p)
	// With a timeout long enough for a replica starved of CPU.
	patient := openBackend(t, p.url(), Options{KeyPrefix: b.KeyPrefix(), MinReplicas: 1, ReplicaTimeout: 5 * time.Second, Logger: quiet})
	g3, err := patient.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	won := mustWin(t, patient, g3.ID, "n")
	if won.Token <= theirs.Token {
		t.Fatalf("token %d after the replica came, not above %d", won.Token, theirs.Token)
	}
	if reply, err := patient.KeepAlive(ctx, g3.ID, simba.KeepAliveRequest{Lease: 10 * time.Second, Unsure: []string{"n"}}); err != nil || reply.Owned["n"] != won.Token {
		t.Fatalf("KeepAlive with the replica = %+v, %v; want n at %d", reply, err, won.Token)
	}
}

// TestMinReplicasBatched: concurrent acquires sent in one pipeline share
// its WAIT, each gets its outcome, and a script the server lost is sent
// again with its own WAIT.
func TestMinReplicasBatched(t *testing.T) {
	p := startServer(t)
	startReplica(t, p)
	b := openBackend(t, p.url(), Options{MinReplicas: 1, ReplicaTimeout: 5 * time.Second, Logger: quiet})
	raw := rawClient(t, p.url())
	ctx := callCtx(t)
	g, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if round == 1 {
			if err := raw.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		errs := make(chan error, 32)
		for i := range 32 {
			go func() {
				r, err := b.Acquire(ctx, g.ID, fmt.Sprint("b", round, ".", i))
				if err == nil && !r.Won {
					err = errors.New("lost")
				}
				errs <- err
			}()
		}
		for range 32 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: Acquire: %v", round, err)
			}
		}
	}
}

// TestMinReplicasEngine: through the engine, an acquire that too few
// replicas acknowledged is a failed attempt: Lock.Acquire times out with
// ErrBackendUnavailable while the replica is missing, and wins once it
// is there.
func TestMinReplicasEngine(t *testing.T) {
	p := startServer(t)
	b := openBackend(t, p.url(), Options{MinReplicas: 1, ReplicaTimeout: 20 * time.Millisecond, Logger: quiet})
	var mu sync.Mutex
	var errs []error
	c, err := simba.New(b, simba.WithConfig(simba.Config{LeaseDuration: 3 * time.Second}), simba.WithLogger(quiet),
		simba.WithEventListener(func(_ context.Context, e simba.Event) {
			if e.Kind == simba.EventBackendError {
				mu.Lock()
				errs = append(errs, e.Err)
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if _, err := c.Lock("job").Acquire(ctx); !errors.Is(err, simba.ErrLockTimeout) || !errors.Is(err, simba.ErrBackendUnavailable) {
		t.Fatalf("Lock.Acquire without a replica = %v, want ErrLockTimeout and ErrBackendUnavailable", err)
	}
	startReplica(t, p)
	term, err := c.Lock("job").Acquire(callCtx(t))
	if err != nil {
		t.Fatalf("Lock.Acquire with the replica: %v", err)
	}
	if err := term.Release(callCtx(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, ErrNotReplicated) }) {
		t.Errorf("backend errors %v, want one matching ErrNotReplicated", errs)
	}
}

// TestMinReplicasFromURL: min_replicas and replica_timeout in the URL set
// the options for Open and simba.OpenBackend, and go-redis never sees
// them; bad values and a replica_timeout alone are refused as a bad URL,
// and a parameter nobody knows is still refused.
func TestMinReplicasFromURL(t *testing.T) {
	p := startServer(t)
	ctx := callCtx(t)
	url := p.url() + "?min_replicas=1&replica_timeout=30ms&dial_timeout=2s"
	check := func(b simba.Backend) {
		t.Helper()
		g, err := b.OpenSession(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, g.ID, "u"); !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "within 30ms") {
			t.Fatalf("Acquire = %v, want ErrNotReplicated within 30ms", err)
		}
	}
	open := func(o Options) *Backend {
		t.Helper()
		b, err := Open(ctx, url, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	check(open(Options{Logger: quiet}))
	ob, err := simba.OpenBackend(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close() })
	check(ob)
	// Options given win over the URL.
	off := open(Options{MinReplicas: 2, ReplicaTimeout: 10 * time.Millisecond, Logger: quiet})
	g, err := off.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.Acquire(ctx, g.ID, "v"); !errors.Is(err, ErrNotReplicated) || !strings.Contains(err.Error(), "0 of 2 replicas acknowledged the write within 10ms") {
		t.Fatalf("Acquire = %v, want the options' 2 replicas and 10ms", err)
	}

	for _, q := range []string{
		"min_replicas=x", "min_replicas=-1", "min_replicas=1&min_replicas=2", "replica_timeout=50ms",
		"min_replicas=1&replica_timeout=0s", "min_replicas=1&replica_timeout=fast", "min_replicas=1&replica_timeout=100us",
		"min_replicas=1&bogus=1",
	} {
		raw := p.url() + "?" + q
		_, err := Open(ctx, raw, Options{Logger: quiet})
		if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, simba.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOptions and simba.ErrInvalidURL", raw, err)
		}
		if _, err := simba.OpenBackend(ctx, raw); !errors.Is(err, simba.ErrInvalidURL) {
			t.Errorf("simba.OpenBackend(%q) = %v, want simba.ErrInvalidURL", raw, err)
		}
	}
}

// TestMinReplicasOptions: MinReplicas and ReplicaTimeout out of bounds,
// and MinReplicas on a Ring, are refused.
func TestMinReplicasOptions(t *testing.T) {
	for _, o := range []Options{
		{MinReplicas: -1},
		{ReplicaTimeout: time.Second},
		{MinReplicas: 1, ReplicaTimeout: time.Microsecond},
		{MinReplicas: 1, ReplicaTimeout: -time.Second},
	} {
		if _, err := o.withDefaults(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%v: %v, want ErrInvalidOptions", o, err)
		}
	}
	if o, err := (Options{MinReplicas: 1}).withDefaults(); err != nil || o.ReplicaTimeout != DefaultReplicaTimeout {
		t.Errorf("MinReplicas 1 alone: %v, %v; want ReplicaTimeout %v", o, err, DefaultReplicaTimeout)
	}
}

// TestReplicaWaitCost measures an acquire+release pair, and a keep-alive,
// with MinReplicas 1 against the same without, on a private primary with
// one replica: the median of every call over interleaved rounds, and the
// lowest and highest median of a round. It runs only with
// SIMBA_MEASURE_REPLICA_WAIT set (it is a measurement, not a check).
func TestReplicaWaitCost(t *testing.T) {
	if os.Getenv("SIMBA_MEASURE_REPLICA_WAIT") == "" {
		t.Skip("set SIMBA_MEASURE_REPLICA_WAIT=1 to measure")
	}
	p := startServer(t)
	startReplica(t, p)
	ctx := context.Background()
	type variant struct {
		name       string
		b          *Backend
		g          simba.SessionID
		pair, ka   []time.Duration
		pairRounds []time.Duration // the median of each round
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	var vs []*variant
	for _, o := range []Options{{Logger: quiet}, {MinReplicas: 1, ReplicaTimeout: 5 * time.Second, Logger: quiet}} {
		b := openBackend(t, p.url(), o)
		g, err := b.OpenSession(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, &variant{name: fmt.Sprintf("min_replicas=%d", o.MinReplicas), b: b, g: g.ID})
	}
	const rounds, pairs, keepAlives = 9, 2000, 500
	for range rounds {
		for _, v := range vs {
			var round []time.Duration
			for range pairs {
				start := time.Now()
				r, err := v.b.Acquire(ctx, v.g, "cost")
				if err != nil || !r.Won {
					t.Fatalf("%s: Acquire = %+v, %v", v.name, r, err)
				}
				if err := v.b.Release(ctx, v.g, "cost", r.Token); err != nil {
					t.Fatal(err)
				}
				round = append(round, time.Since(start))
			}
			v.pair = append(v.pair, round...)
			v.pairRounds = append(v.pairRounds, median(round))
			for range keepAlives {
				start := time.Now()
				if _, err := v.b.KeepAlive(ctx, v.g, renewal(time.Minute)); err != nil {
					t.Fatalf("%s: KeepAlive: %v", v.name, err)
				}
				v.ka = append(v.ka, time.Since(start))
			}
		}
	}
	base, baseKA := median(vs[0].pair), median(vs[0].ka)
	for _, v := range vs {
		t.Logf("%s: acquire+release median %v over %d pairs in %d rounds (round medians %v to %v), %.2fx; keep-alive median %v over %d, %.2fx",
			v.name, median(v.pair), len(v.pair), rounds, slices.Min(v.pairRounds), slices.Max(v.pairRounds),
			float64(median(v.pair))/float64(base), median(v.ka), len(v.ka), float64(median(v.ka))/float64(baseKA))
	}
}

// TestReplicasWithoutWaitWarning: a Backend whose primary has a connected
// replica and MinReplicas 0 records one WarnReplicasWithoutWait at its
// first OpenSession (directly and through a sentinel); with MinReplicas,
// or without a replica, it records none.
func TestReplicasWithoutWaitWarning(t *testing.T) {
	p := startServer(t)
	ctx := callCtx(t)
	open := func(b *Backend) {
		t.Helper()
		for range 2 {
			g, err := b.OpenSession(ctx, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = b.CloseSession(ctx, g.ID)
		}
	}
	alone := openBackend(t, p.url(), Options{Logger: quiet})
	open(alone)
	if w := alone.Warnings(); len(w) != 0 {
		t.Fatalf("without a replica: warnings %+v, want none", w)
	}

	startReplica(t, p)
	var got []Warning
	var logs strings.Builder
	b := openBackend(t, p.url(), Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnWarning: func(w Warning) { got = append(got, w) }})
	open(b)
	if len(got) != 1 || got[0].Code != WarnReplicasWithoutWait || !strings.Contains(got[0].Message, "1 connected replica") ||
		!strings.Contains(got[0].Message, "min_replicas=1") {
		t.Fatalf("OnWarning got %+v, want one %s", got, WarnReplicasWithoutWait)
	}
	if w := b.Warnings(); len(w) != 1 || w[0] != got[0] {
		t.Fatalf("Warnings() = %+v, want %+v", w, got)
	}
	// At Debug: the engine logs it at Warn, from the grant.
	if n := strings.Count(logs.String(), "level=DEBUG msg=\"simbaredis: the Redis primary has 1 connected"); n != 1 ||
		strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("the warning logged %d times at Debug, want once and nothing at Warn:\n%s", n, logs.String())
	}

	waited := openBackend(t, p.url(), Options{MinReplicas: 1, Logger: quiet})
	open(waited)
	if w := waited.Warnings(); len(w) != 0 {
		t.Fatalf("with MinReplicas: warnings %+v, want none", w)
	}

	port := startSentinel(t, p, "")
	sb, err := Open(ctx, fmt.Sprintf("redis+sentinel://127.0.0.1:%d/mymaster", port), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	open(sb)
	if w := sb.Warnings(); len(w) != 1 || w[0].Code != WarnReplicasWithoutWait {
		t.Fatalf("through a sentinel: warnings %+v, want one %s", w, WarnReplicasWithoutWait)
	}
}

// TestWarningsReachTheEngine: every SessionGrant carries the set-up
// warnings (a replica without MinReplicas, an evicting policy), and the
// engine publishes each once per session as an EventBackendWarning.
func TestWarningsReachTheEngine(t *testing.T) {
	p := startServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	startReplica(t, p)
	b := openBackend(t, p.url(), Options{Logger: quiet})
	ctx := callCtx(t)
	codes := func(ws []simba.Warning) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.Code)
		}
		slices.Sort(out)
		return out
	}
	want := []string{WarnEvictionPolicy, WarnReplicasWithoutWait}
	for range 2 {
		g, err := b.OpenSession(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := codes(g.Warnings); !slices.Equal(got, want) {
			t.Fatalf("grant warnings %v, want %v", got, want)
		}
		_ = b.CloseSession(ctx, g.ID)
	}

	events := make(chan simba.Event, 16)
	c, err := simba.New(b, simba.WithLogger(quiet), simba.WithEventListener(func(_ context.Context, e simba.Event) {
		if e.Kind == simba.EventBackendWarning {
			events <- e
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock("job").Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	var got []simba.Warning
	for len(got) < 2 {
		select {
		case e := <-events:
			got = append(got, e.Warning)
		case <-ctx.Done():
			t.Fatalf("events %v, want both warnings", got)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for drained := false; !drained; {
		select {
		case e := <-events:
			got = append(got, e.Warning)
		default:
			drained = true
		}
	}
	if codes := codes(got); !slices.Equal(codes, want) {
		t.Fatalf("EventBackendWarning codes %v, want %v once each", codes, want)
	}
}
