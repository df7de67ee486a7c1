package simba_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// groupNode is one node running a group, with the partitions it holds.
type groupNode struct {
	c      *simba.Client
	cancel context.CancelFunc
	done   chan struct{}
}

type partitionLog struct {
	mu   sync.Mutex
	held map[int]map[*groupNode]*simba.Term // partition -> node -> term while the work runs
}

func (l *partitionLog) count(n *groupNode) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := 0
	for _, nodes := range l.held {
		if nodes[n] != nil {
			k++
		}
	}
	return k
}

// overlap reports a partition held by two valid terms at once.
func (l *partitionLog) overlap() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, nodes := range l.held {
		valid := 0
		for _, t := range nodes {
			if t.Valid() {
				valid++
			}
		}
		if valid > 1 {
			return fmt.Errorf("partition %d held by %d valid terms", p, valid)
		}
	}
	return nil
}

func startGroupNode(t testing.TB, s *memory.Server, log *partitionLog, n int, cfg simba.Config) *groupNode {
	c, err := simba.New(s.Connect(), simba.WithConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	node := &groupNode{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(node.done)
		err := c.Group("work", n).Run(ctx, func(ctx context.Context, p int, term *simba.Term) error {
			log.mu.Lock()
			if log.held[p] == nil {
				log.held[p] = map[*groupNode]*simba.Term{}
			}
			log.held[p][node] = term
			log.mu.Unlock()
			<-ctx.Done()
			log.mu.Lock()
			delete(log.held[p], node)
			log.mu.Unlock()
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}()
	return node
}

func (n *groupNode) stop() {
	n.cancel()
	<-n.done
	_ = n.c.Close(context.Background())
}

// R-GRP-1, R-GRP-2: 1 to 5 nodes join, then leave; after each change the
// spread settles within one of even, and no partition ever has two valid
// terms.
func TestGroupRebalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		s := memory.New()
		log := &partitionLog{held: map[int]map[*groupNode]*simba.Term{}}
		var nodes []*groupNode
		check := func(stage string) {
			t.Helper()
			// Settle: a few renew intervals, checking for overlap throughout.
			for range 100 {
				time.Sleep(100 * time.Millisecond)
				if err := log.overlap(); err != nil {
					t.Fatalf("%s: %v", stage, err)
				}
			}
			lo, hi, total := n, 0, 0
			for _, node := range nodes {
				k := log.count(node)
				lo, hi, total = min(lo, k), max(hi, k), total+k
			}
			if total != n || hi-lo > 1 {
				counts := []int{}
				for _, node := range nodes {
					counts = append(counts, log.count(node))
				}
				t.Fatalf("%s: partitions per node %v (total %d of %d), want within one of even", stage, counts, total, n)
			}
		}
		for i := 1; i <= 5; i++ {
			nodes = append(nodes, startGroupNode(t, s, log, n, testConfig()))
			check(fmt.Sprintf("%d nodes", i))
		}
		for len(nodes) > 1 {
			nodes[0].stop()
			nodes = nodes[1:]
			check(fmt.Sprintf("down to %d nodes", len(nodes)))
		}
		nodes[0].stop()
	})
}

func TestGroupBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		ctx := context.Background()
		noop := func(context.Context, int, *simba.Term) error { return nil }
		for _, tt := range []struct {
			name string
			n    int
			fn   simba.PartitionFunc
			want error
		}{
			{"g", 0, noop, simba.ErrInvalidArgument},
			{"g", simba.MaxPartitions + 1, noop, simba.ErrInvalidArgument},
			{"bad name", 2, noop, simba.ErrInvalidName},
			{strings.Repeat("g", 127), 2, noop, simba.ErrInvalidName},
			{"g", 2, nil, simba.ErrInvalidArgument},
		} {
			if err := c.Group(tt.name, tt.n).Run(ctx, tt.fn); !errors.Is(err, tt.want) {
				t.Errorf("Group(%q, %d).Run = %v, want %v", tt.name, tt.n, err, tt.want)
			}
		}
	})
}

// BenchmarkGroupSettle reports how long partitions take to settle within
// one of even (real time, memory backend, 300ms lease renewed every 100ms)
// when a node joins a group of 3 running 12 partitions, and when one
// leaves: settle_join_ms and settle_leave_ms.
func BenchmarkGroupSettle(b *testing.B) {
	const n = 12
	cfg := simba.Config{LeaseDuration: 300 * time.Millisecond, RenewInterval: 100 * time.Millisecond}
	var join, leave time.Duration
	for b.Loop() {
		s := memory.New()
		log := &partitionLog{held: map[int]map[*groupNode]*simba.Term{}}
		var nodes []*groupNode
		start := func() { nodes = append(nodes, startGroupNode(b, s, log, n, cfg)) }
		settled := func() time.Duration {
			begin := time.Now()
			for time.Since(begin) < 10*time.Second {
				lo, hi, total := n, 0, 0
				for _, node := range nodes {
					k := log.count(node)
					lo, hi, total = min(lo, k), max(hi, k), total+k
				}
				if total == n && hi-lo <= 1 {
					return time.Since(begin)
				}
				time.Sleep(5 * time.Millisecond)
			}
			b.Fatal("partitions did not settle within 10s")
			return 0
		}
		for range 3 {
			start()
		}
		settled()
		start()
		join += settled()
		nodes[0].stop()
		nodes = nodes[1:]
		leave += settled()
		for _, node := range nodes {
			node.stop()
		}
	}
	b.ReportMetric(float64(join.Milliseconds())/float64(b.N), "settle_join_ms")
	b.ReportMetric(float64(leave.Milliseconds())/float64(b.N), "settle_leave_ms")
}

// slowFirstRelease is a memory connection whose first release waits d on
// its way to the server.
type slowFirstRelease struct {
	*memory.Conn
	n atomic.Int32
	d time.Duration
}

func (b *slowFirstRelease) Release(ctx context.Context, id simba.SessionID, name string, token uint64) error {
	if b.n.Add(1) == 1 {
		select {
		case <-time.After(b.d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.Conn.Release(ctx, id, name, token)
}

// A partition won while the node already had its share is given back in
// the background; Group.Run waits for that release before it returns, so
// no partition is held once it did.
func TestGroupRunWaitsForUnkeptWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		ctx := context.Background()
		// A second member that holds nothing: this node's share is one
		// partition of two.
		other := s.Connect()
		g, err := other.OpenSession(ctx, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.JoinGroup(ctx, g.ID, "g"); err != nil {
			t.Fatal(err)
		}
		stopKA := make(chan struct{})
		kaDone := make(chan struct{})
		go func() {
			defer close(kaDone)
			for {
				select {
				case <-stopKA:
					return
				case <-time.After(time.Second):
					_, _ = other.KeepAlive(ctx, g.ID, simba.KeepAliveRequest{Lease: 3 * time.Second})
				}
			}
		}()
		defer func() { close(stopKA); <-kaDone }()

		c := newClient(t, &slowFirstRelease{Conn: s.Connect(), d: 400 * time.Millisecond})
		runCtx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() {
			ran <- c.Group("g", 2).Run(runCtx, func(ctx context.Context, _ int, _ *simba.Term) error {
				<-ctx.Done()
				return nil
			})
		}()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait() // both won; the one past the share is on its way back
		cancel()
		if err := <-ran; err != nil {
			t.Fatalf("Run: %v", err)
		}
		for p := range 2 {
			if id, tok, ok := s.Owner(fmt.Sprintf("g.%d", p)); ok {
				t.Errorf("Run returned with g.%d held by %s (token %d)", p, id, tok)
			}
		}
	})
}

// A Group.Run started again while the previous Run of the same group still
// waits for partition work to exit is left alone by that Run's cleanup: the
// node stays a member, and the new Run's partitions keep to the node's
// share (R-GRP-2).
func TestGroupRunAgainDuringTheOldCleanup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		ctx := context.Background()
		// A second member, holding g.0 and g.1 at first: this node's share
		// is two partitions of four.
		other, err := s.OpenSession(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.CloseSession(ctx, other.ID) }()
		if _, err := s.JoinGroup(ctx, other.ID, "g"); err != nil {
			t.Fatal(err)
		}
		var tokens [2]uint64
		for p := range tokens {
			res, err := s.Acquire(ctx, other.ID, fmt.Sprintf("g.%d", p))
			if err != nil || !res.Won {
				t.Fatalf("Acquire g.%d: %+v %v", p, res, err)
			}
			tokens[p] = res.Token
		}
		held := func() int {
			n := 0
			for p := range 4 {
				if id, _, ok := s.Owner(fmt.Sprintf("g.%d", p)); ok && id != other.ID {
					n++
				}
			}
			return n
		}

		c := newClient(t, s.Connect())
		awaitLive(t, c)
		workUntil := time.Now().Add(2 * time.Second)
		oldCtx, cancelOld := context.WithCancel(ctx)
		oldDone := make(chan error, 1)
		go func() {
			oldDone <- c.Group("g", 4).Run(oldCtx, func(context.Context, int, *simba.Term) error {
				time.Sleep(time.Until(workUntil)) // ignores its ctx
				return nil
			})
		}()
		time.Sleep(time.Second)
		if n := held(); n != 2 {
			t.Fatalf("the first Run holds %d partitions, want 2", n)
		}
		cancelOld()
		synctest.Wait() // the old Run stops its partitions, and waits for the work

		newCtx, cancelNew := context.WithCancel(ctx)
		newDone := make(chan error, 1)
		go func() {
			newDone <- c.Group("g", 4).Run(newCtx, func(ctx context.Context, _ int, _ *simba.Term) error {
				<-ctx.Done()
				return nil
			})
		}()
		defer func() {
			cancelNew()
			if err := <-newDone; err != nil {
				t.Errorf("the second Run: %v", err)
			}
		}()
		for p, tok := range tokens {
			if err := s.Release(ctx, other.ID, fmt.Sprintf("g.%d", p), tok); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-oldDone; err != nil {
			t.Fatalf("the first Run: %v", err)
		}
		synctest.Wait()
		if m := s.Members("g"); m != 2 {
			t.Errorf("%d members once the first Run returned, want 2: the second Run still runs", m)
		}

		// The other member leaves, so this node takes every partition, then
		// joins again: this node gives two back, and keeps to two.
		if err := s.LeaveGroup(ctx, other.ID, "g"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if n := held(); n != 4 {
			t.Fatalf("the second Run alone holds %d partitions, want 4", n)
		}
		if _, err := s.JoinGroup(ctx, other.ID, "g"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if n := held(); n != 2 {
			t.Errorf("the second Run holds %d partitions of a group of two members, want 2", n)
		}
	})
}
