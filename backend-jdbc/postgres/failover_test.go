package simbapg

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	simba "github.com/simba-go/simba/core"
)

// replicaPair is a PostgreSQL primary and its streaming replica started by
// the robustness suite's topology script (pg_basebackup -R), on free
// loopback ports, in a directory of the test's own.
type replicaPair struct {
	t       testing.TB
	sh, lib string
	dirs    [2]string
	ports   [2]int
	primary int
}

// startReplicaPair starts the pair, the primary first in URL's host list;
// it skips the test when PostgreSQL is not installed or with -short.
func startReplicaPair(t testing.TB, sync bool) *replicaPair {
	t.Helper()
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	if _, err := os.Stat("/usr/lib/postgresql"); err != nil {
		t.Skip("PostgreSQL is not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	p := &replicaPair{
		t:   t,
		lib: filepath.Join(root, "tools", "testenv", "lib.sh"),
		sh:  filepath.Join(root, "tools", "chaos", "internal", "topology", "postgres.sh"),
	}
	base := t.TempDir()
	_ = os.Chmod(base, 0o755) // the postgres user must reach it
	for i := range p.dirs {
		p.dirs[i] = filepath.Join(base, fmt.Sprintf("pg%d", i+1))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p.ports[i] = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	t.Cleanup(func() {
		for _, d := range p.dirs {
			p.run("down", d)
		}
	})
	p.run("primary", p.dirs[0], fmt.Sprint(p.ports[0]))
	mode := "off"
	if sync {
		mode = "on"
	}
	p.run("sync", p.dirs[0], fmt.Sprint(p.ports[0]), mode)
	p.run("replica", p.dirs[1], fmt.Sprint(p.ports[1]), fmt.Sprint(p.ports[0]))
	return p
}

func (p *replicaPair) run(action string, args ...string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", append([]string{p.sh, p.lib, action}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("postgres.sh %s: %v\n%s", action, err, out)
	}
}

// URL names both servers, with target_session_attrs=read-write.
func (p *replicaPair) URL(params string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?target_session_attrs=read-write&sslmode=disable%s",
		p.ports[0], p.ports[1], params)
}

func (p *replicaPair) nodeURL(i int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.ports[i])
}

// caughtUp waits until the replica has replayed everything the primary
// has written, so that a kill loses nothing.
func (p *replicaPair) caughtUp() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.nodeURL(p.primary))
	if err != nil {
		p.t.Fatal(err)
	}
	defer c.Close(ctx)
	for {
		var ok bool
		err := c.QueryRow(ctx, "SELECT coalesce(bool_and(replay_lsn >= pg_current_wal_lsn()), false) FROM pg_stat_replication").Scan(&ok)
		if err != nil {
			p.t.Fatal(err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			p.t.Fatal("the replica did not catch up")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// killAndPromote kills the primary (SIGKILL) and promotes the replica,
// leaving the old primary down.
func (p *replicaPair) killAndPromote() {
	p.t.Helper()
	p.run("kill", p.dirs[p.primary])
	p.run("promote", p.dirs[1-p.primary])
	p.primary = 1 - p.primary
}

// freezeAndPromote stops the primary with SIGSTOP, a host that hangs or
// is cut off: it accepts TCP connections and answers nothing. It then
// promotes the replica.
func (p *replicaPair) freezeAndPromote() {
	p.t.Helper()
	p.run("freeze", p.dirs[p.primary])
	p.run("promote", p.dirs[1-p.primary])
	p.primary = 1 - p.primary
}

// rejoin rebuilds the old primary as a streaming replica of the new one.
func (p *replicaPair) rejoin() {
	p.t.Helper()
	old := 1 - p.primary
	p.run("replica", p.dirs[old], fmt.Sprint(p.ports[old]), fmt.Sprint(p.ports[p.primary]))
}

// TestFailoverFindsNewPrimary opens one backend on a multi-host URL and
// promotes the replica twice under it: once with the old primary dead,
// once with it back as a read-only replica listed first. Without a
// reopen, the backend's calls must reach the new primary after at most a
// few failures (one per pooled connection to the old one), with the
// session and its lease intact (nothing was lost: the replica had caught
// up).
func TestFailoverFindsNewPrimary(t *testing.T) {
	p := startReplicaPair(t, false)
	ctx := context.Background()
	const conns = 4
	b, err := Open(ctx, p.URL(fmt.Sprintf("&pool_max_conns=%d&connect_timeout=2", conns)),
		Options{TablePrefix: "simba_failover_", Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const lease = time.Minute
	g, err := b.OpenSession(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Acquire(ctx, g.ID, "held")
	if err != nil || !got.Won {
		t.Fatalf("Acquire = %+v, %v", got, err)
	}
	req := simba.KeepAliveRequest{Lease: lease, Held: map[string]uint64{"held": got.Token}, Generation: 1}
	for round := range 2 {
		// Fill the pool, so that every connection it holds goes to the
		// old primary.
		errs := make(chan error, conns)
		for range conns {
			go func() { _, err := b.KeepAlive(ctx, g.ID, req); errs <- err }()
		}
		for range conns {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		p.caughtUp()
		p.killAndPromote()
		failed := 0
		deadline := time.Now().Add(20 * time.Second)
		for {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			r, err := b.KeepAlive(cctx, g.ID, req)
			cancel()
			if err == nil {
				if len(r.Lost) != 0 {
					t.Fatalf("round %d: after the promotion the session lost %v, want held at %d", round, r.Lost, got.Token)
				}
				break
			}
			failed++
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the backend did not reach the new primary in 20s (%d failed calls), last: %v", round, failed, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if failed > conns {
			t.Errorf("round %d: %d calls failed before one reached the new primary, want at most %d (one per pooled connection)", round, failed, conns)
		}
		t.Logf("round %d: %d calls failed before the new primary answered", round, failed)
		name := fmt.Sprintf("after-%d", round)
		if r, err := b.Acquire(ctx, g.ID, name); err != nil || !r.Won {
			t.Fatalf("round %d: Acquire(%s) on the new primary = %+v, %v", round, name, r, err)
		}
		if round == 0 {
			// The old primary comes back, first in the URL, as a
			// replica: connections must skip it.
			p.rejoin()
			for range 2 * conns {
				if _, err := b.KeepAlive(ctx, g.ID, req); err != nil {
					t.Fatalf("with the old primary back as a replica: %v", err)
				}
			}
		}
	}
	if err := b.CloseSession(ctx, g.ID); err != nil {
		t.Error(err)
	}
}

// TestFailoverPastHungHost freezes the primary, first in the URL's host
// list, and promotes the replica: the URL gives no connect_timeout, and
// the backend must still reach the new primary, without a reopen, within
// a few seconds. A pool's new connection is made in the background,
// without the deadline of the call that asked for it; with no bound of
// its own, one to a host that accepts TCP connections and never answers
// waits forever, and the pool, all its slots taken by such attempts,
// never tries the second host.
func TestFailoverPastHungHost(t *testing.T) {
	p := startReplicaPair(t, false)
	ctx := context.Background()
	b, err := Open(ctx, p.URL("&pool_max_conns=2"), Options{TablePrefix: "simba_failover_", Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const lease = time.Minute
	g, err := b.OpenSession(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Acquire(ctx, g.ID, "held")
	if err != nil || !got.Won {
		t.Fatalf("Acquire = %+v, %v", got, err)
	}
	req := simba.KeepAliveRequest{Lease: lease, Held: map[string]uint64{"held": got.Token}, Generation: 1}
	p.caughtUp()
	p.freezeAndPromote()
	start := time.Now()
	const within = 30 * time.Second
	var last error
	for time.Since(start) < within {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var r simba.KeepAliveReply
		r, last = b.KeepAlive(cctx, g.ID, req)
		cancel()
		if last == nil {
			if len(r.Lost) != 0 {
				t.Fatalf("after the promotion the session lost %v, want held at %d", r.Lost, got.Token)
			}
			t.Logf("the new primary answered %v after the promotion", time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the backend did not reach the new primary within %v of the promotion; last error: %v", within, last)
}

// TestSetupWarningsOnReplicaPair opens sessions on a primary with a
// streaming replica: with asynchronous replication the grant warns of it,
// with synchronous_standby_names set it does not. A role without
// pg_read_all_stats sees the standby too.
func TestSetupWarningsOnReplicaPair(t *testing.T) {
	p := startReplicaPair(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got := grantWarnings(t, p.URL("")); !slices.Equal(got, []string{WarnAsyncReplication}) {
		t.Errorf("asynchronous replica: warnings %v, want [%s]", got, WarnAsyncReplication)
	}
	admin, err := pgx.Connect(ctx, p.nodeURL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE ROLE simba_warn_plain LOGIN"); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, strings.Replace(p.nodeURL(0), "postgres://postgres@", "postgres://simba_warn_plain@", 1), 1)
	s, err := readSetup(ctx, pool)
	if err != nil || s.standbys != 1 {
		t.Errorf("a plain role reads %+v, %v; want 1 standby", s, err)
	}
	p.run("sync", p.dirs[0], fmt.Sprint(p.ports[0]), "on")
	if got := grantWarnings(t, p.URL("")); len(got) != 0 {
		t.Errorf("synchronous replica: warnings %v, want none", got)
	}
}

// TestSynchronousStandbyDownHandsOutNoToken stops the synchronous standby
// and acquires: every commit then waits for it, and PostgreSQL, when the
// call's deadline cancels that wait, keeps the commit on the primary
// alone (with a WARNING). The backend must report each such acquire as
// failed, never as won: a token that only the primary holds is never
// handed out, so a later promotion of the standby, which lacks it, cannot
// make a token go back.
func TestSynchronousStandbyDownHandsOutNoToken(t *testing.T) {
	p := startReplicaPair(t, true)
	ctx := context.Background()
	b, err := Open(ctx, p.URL(""), Options{TablePrefix: "simba_syncdown_", Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g, err := b.OpenSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p.run("kill", p.dirs[1])
	for i := range 3 {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		r, err := b.Acquire(cctx, g.ID, "held")
		cancel()
		if err == nil || r.Won {
			t.Errorf("acquire %d with the synchronous standby down: %+v, %v; want a failure", i, r, err)
		}
	}
	var committed int64
	pool := newPool(t, p.nodeURL(0), 1)
	if err := pool.QueryRow(ctx, "SELECT coalesce(max(token), 0) FROM simba_syncdown_lease").Scan(&committed); err != nil {
		t.Fatal(err)
	}
	t.Logf("the primary alone committed tokens up to %d, none handed out", committed)
}

// TestFailoverWatchFollowsNewPrimary watches a lease on a multi-host URL
// and promotes the replica: the lost listening connection wakes the
// watch, the backend listens again on the new primary, and a release
// there reaches a new watch.
func TestFailoverWatchFollowsNewPrimary(t *testing.T) {
	p := startReplicaPair(t, false)
	ctx := context.Background()
	open := func() *Backend {
		b, err := Open(ctx, p.URL("&connect_timeout=2"), Options{TablePrefix: "simba_failwatch_", Migrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	holder, watcher := open(), open()
	g, err := holder.OpenSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := holder.Acquire(ctx, g.ID, "job")
	if err != nil || !got.Won {
		t.Fatalf("Acquire = %+v, %v", got, err)
	}
	ch, err := watcher.WatchRelease(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	p.caughtUp()
	p.killAndPromote()
	wantFired(t, ch, "the primary was killed")

	// A watch on the new primary: the first ones may fail while the
	// listener reconnects.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no watch on the new primary within 20s: %v", err)
		}
		ch, err = watcher.WatchRelease(ctx, "job")
		if err == nil {
			select {
			case <-ch: // woken by a lost connection, or the lease looked free: again
				continue
			default:
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		err := holder.Release(ctx, g.ID, "job", got.Token)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder did not reach the new primary within 20s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantFired(t, ch, "the release on the new primary")
}
