package simbazk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

// A release and the next acquire of one name by one session may run at the
// same time (the engine sends them concurrently). These tests force the two
// orders in which the requests of such calls could interleave and check
// that neither deletes the node of a newer term.

// stopWait bounds every wait of these tests: a call that is not answered by
// then has hung.
const stopWait = 10 * time.Second

// held is how long a test gives a call started against a paused one to
// finish on its own before resuming the paused one. Calls that wait for the
// paused one's lock do not finish meanwhile; that is the point.
const held = 300 * time.Millisecond

// pauser is a Backend.pause hook that stops one chosen call between its
// two requests until the test resumes it.
type pauser struct {
	mu     sync.Mutex
	op     string        // the call to stop next; "" for none
	paused chan struct{} // closed once that call stopped
	resume chan struct{} // closed to let it go on
	once   *sync.Once
}

// newPauser installs a pauser on b, which must not have been used yet. The
// stopped call, if any, is resumed when the test ends.
func newPauser(t *testing.T, b *Backend) *pauser {
	p := &pauser{}
	b.pause = p.hook
	t.Cleanup(func() { p.proceed() })
	return p
}

// arm makes the next call named op stop in the hook.
func (p *pauser) arm(op string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.op, p.paused, p.resume, p.once = op, make(chan struct{}), make(chan struct{}), new(sync.Once)
}

func (p *pauser) hook(op string) {
	p.mu.Lock()
	if op != p.op {
		p.mu.Unlock()
		return
	}
	p.op = ""
	paused, resume := p.paused, p.resume
	p.mu.Unlock()
	close(paused)
	select {
	case <-resume:
	case <-time.After(stopWait): // a failed test must not hang the backend
	}
}

// stopped waits until the armed call stopped in the hook.
func (p *pauser) stopped(t *testing.T, what string) {
	t.Helper()
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	select {
	case <-paused:
	case <-time.After(stopWait):
		t.Fatalf("%s did not reach the pause within %v", what, stopWait)
	}
}

// proceed resumes the stopped call; it is a no-op when nothing was armed or
// it was resumed already.
func (p *pauser) proceed() {
	p.mu.Lock()
	once, resume := p.once, p.resume
	p.mu.Unlock()
	if once != nil {
		once.Do(func() { close(resume) })
	}
}

// result is the outcome of a call run on its own goroutine.
type result[T any] struct {
	v   T
	err error
}

// start runs f on a goroutine of its own; the channel gets its result.
func start[T any](f func() (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	go func() {
		v, err := f()
		ch <- result[T]{v, err}
	}()
	return ch
}

// await returns the result of a call started with start, failing the test
// when it does not come within stopWait or is an error.
func await[T any](t *testing.T, ch <-chan result[T], what string) T {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.v
	case <-time.After(stopWait):
		t.Fatalf("%s not answered within %v", what, stopWait)
	}
	panic("unreachable")
}

// peek returns the result of a call started with start if it came within
// d, and whether it came.
func peek[T any](ch <-chan result[T], d time.Duration) (result[T], bool) {
	select {
	case r := <-ch:
		return r, true
	case <-time.After(d):
		return result[T]{}, false
	}
}

// zid returns the Zookeeper session id of session s of b.
func zid(t *testing.T, b *Backend, s simba.SessionID) int64 {
	t.Helper()
	ss, err := b.session(s)
	if err != nil {
		t.Fatalf("session %s: %v", s, err)
	}
	return ss.zid.Load()
}

// node reads the lease node of name behind the backend's back: whether it
// exists, its owner (a Zookeeper session id) and its czxid.
func (a *admin) node(b *Backend, name string) (ok bool, owner, czxid int64) {
	a.t.Helper()
	ok, st, err := a.conn.Exists(b.leasePath(name))
	if err != nil {
		a.t.Fatalf("admin: exists %s: %v", b.leasePath(name), err)
	}
	if !ok {
		return false, 0, 0
	}
	return true, st.EphemeralOwner, st.Czxid
}

// wantOwned fails unless the node of name exists, owned by session s of b
// with czxid token; why says what led there.
func (a *admin) wantOwned(b *Backend, s simba.SessionID, owner int64, name string, token uint64, why string) {
	a.t.Helper()
	ok, got, czxid := a.node(b, name)
	if !ok || got != owner || uint64(czxid) != token {
		a.t.Fatalf("%s: node of %q: exists=%v owner=%x czxid=%d, want owned by session %s (%x) with czxid %d",
			why, name, ok, got, czxid, s, owner, token)
	}
}

// secondNode returns another backend (another node) on the root of b.
func secondNode(t *testing.T, b *Backend, servers []string) *Backend {
	t.Helper()
	o, err := New(servers, Options{Root: b.Root(), Logger: quiet()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// TestReleaseStoppedBeforeDeleteWhileReacquire: a release of term T1 that
// has read the node (its own, at T1) and not yet deleted it, while the same
// session acquires the name again. Without serialisation the re-acquire
// replaces the node (a new term T2, again at version 1) and the release
// then deletes it: the session would believe it holds T2 with no node.
func TestReleaseStoppedBeforeDeleteWhileReacquire(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	p := newPauser(t, b)
	a := dialAdmin(t, servers)
	defer a.close()
	s := mustOpen(t, b, 5*time.Second)
	const name = "handover"
	first := mustAcquire(t, b, s, name)
	if !first.Won {
		t.Fatal("first Acquire not won")
	}

	p.arm("release " + name)
	relCtx, acqCtx := ctx(t), ctx(t)
	rel := start(func() (struct{}, error) { return struct{}{}, b.Release(relCtx, s, name, first.Token) })
	p.stopped(t, "Release")
	acq := start(func() (simba.AcquireResult, error) { return b.Acquire(acqCtx, s, name) })
	r, early := peek(acq, held)
	p.proceed()
	await(t, rel, "Release")
	if !early {
		r.v = await(t, acq, "Acquire")
	} else if r.err != nil {
		t.Fatalf("Acquire: %v", r.err)
	}

	again := r.v
	if !again.Won || again.Token <= first.Token {
		t.Fatalf("re-acquire = %+v, want won with a token above %d", again, first.Token)
	}
	a.wantOwned(b, s, zid(t, b, s), name, again.Token, "after a release of the previous term ran beside the re-acquire")
	if got := owned(t, b, s, name); len(got) != 1 || got[name] != again.Token {
		t.Fatalf("KeepAlive owns = %v, want %s:%d", got, name, again.Token)
	}
}

// TestReacquireStoppedBeforeMultiWhileReleaseAndContender: a re-acquire
// that has seen its own node (term T1) and not yet sent the multi that
// replaces it, while the same session releases T1 and a second session
// acquires. Without serialisation the release deletes the node, the second
// session creates it (again at version 1) and the re-acquire's multi then
// deletes the second session's node.
func TestReacquireStoppedBeforeMultiWhileReleaseAndContender(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	p := newPauser(t, b)
	o := secondNode(t, b, servers)
	a := dialAdmin(t, servers)
	defer a.close()
	s, c := mustOpen(t, b, 5*time.Second), mustOpen(t, o, 5*time.Second)
	const name = "handover"
	first := mustAcquire(t, b, s, name)
	if !first.Won {
		t.Fatal("first Acquire not won")
	}

	p.arm("acquire " + name)
	relCtx, acqCtx := ctx(t), ctx(t)
	acq := start(func() (simba.AcquireResult, error) { return b.Acquire(acqCtx, s, name) })
	p.stopped(t, "Acquire")
	rel := start(func() (struct{}, error) { return struct{}{}, b.Release(relCtx, s, name, first.Token) })
	relRes, early := peek(rel, held)
	if early && relRes.err != nil {
		t.Fatalf("Release: %v", relRes.err)
	}
	contender := mustAcquire(t, o, c, name)
	p.proceed()
	again := await(t, acq, "Acquire")
	if !early {
		await(t, rel, "Release")
	}

	if contender.Won {
		// The release landed before the re-acquire: the second session's
		// term must survive it.
		if again.Won {
			t.Fatalf("both sessions won: the re-acquire with token %d, the second session with %d", again.Token, contender.Token)
		}
		a.wantOwned(o, c, zid(t, o, c), name, contender.Token, "the second session won after the release")
		if got := owned(t, o, c, name); got[name] != contender.Token {
			t.Fatalf("second session's KeepAlive owns = %v, want %s:%d", got, name, contender.Token)
		}
		return
	}
	// The re-acquire came first: it won, the release of T1 was a no-op.
	if !again.Won || again.Token <= first.Token {
		t.Fatalf("re-acquire = %+v while the second session lost, want won with a token above %d", again, first.Token)
	}
	a.wantOwned(b, s, zid(t, b, s), name, again.Token, "the re-acquire won before the release of the previous term")
	if got := owned(t, b, s, name); len(got) != 1 || got[name] != again.Token {
		t.Fatalf("KeepAlive owns = %v, want %s:%d", got, name, again.Token)
	}
}

// TestReleaseReacquireStress releases a term and acquires the name again
// on the same session concurrently, with a contender on another session,
// round after round; the hook adds a random delay between the two requests
// of each call to widen the windows. After every round the node must
// belong to exactly the session that won, with its token.
func TestReleaseReacquireStress(t *testing.T) {
	const rounds, budget = 200, 10 * time.Second
	b, servers := newTestBackend(t, Options{})
	b.pause = func(string) { time.Sleep(rand.N(2 * time.Millisecond)) }
	o := secondNode(t, b, servers)
	a := dialAdmin(t, servers)
	defer a.close()
	s, c := mustOpen(t, b, 5*time.Second), mustOpen(t, o, 5*time.Second)
	zs, zc := zid(t, b, s), zid(t, o, c)
	const name = "stress"

	r := mustAcquire(t, b, s, name)
	if !r.Won {
		t.Fatal("first Acquire not won")
	}
	tok, last := r.Token, r.Token
	deadline := time.Now().Add(budget)
	n := 0
	for ; n < rounds && time.Now().Before(deadline); n++ {
		call, cancel := context.WithTimeout(context.Background(), stopWait)
		var (
			wg      sync.WaitGroup
			relErr  error
			ra, rc  simba.AcquireResult
			aE, cE  error
			release = func() { relErr = b.Release(call, s, name, tok) }
			again   = func() { ra, aE = b.Acquire(call, s, name) }
			contend = func() { rc, cE = o.Acquire(call, c, name) }
		)
		for _, f := range rotate(n, release, again, contend) {
			wg.Go(f)
		}
		wg.Wait()
		cancel()
		if err := errors.Join(relErr, aE, cE); err != nil {
			t.Fatalf("round %d: %v", n, err)
		}
		switch {
		case ra.Won && rc.Won:
			t.Fatalf("round %d: both sessions believe they won: tokens %d (re-acquire) and %d (contender)", n, ra.Token, rc.Token)
		case ra.Won:
			a.wantOwned(b, s, zs, name, ra.Token, fmt.Sprintf("round %d: the re-acquire won", n))
			tok = ra.Token
		case rc.Won:
			a.wantOwned(o, c, zc, name, rc.Token, fmt.Sprintf("round %d: the contender won", n))
			if err := o.Release(ctx(t), c, name, rc.Token); err != nil {
				t.Fatalf("round %d: contender's Release: %v", n, err)
			}
			r := mustAcquire(t, b, s, name)
			if !r.Won {
				t.Fatalf("round %d: Acquire after the contender released = %+v, want won", n, r)
			}
			a.wantOwned(b, s, zs, name, r.Token, fmt.Sprintf("round %d: won back after the contender released", n))
			if r.Token <= rc.Token {
				t.Fatalf("round %d: token %d after the contender's %d, want more", n, r.Token, rc.Token)
			}
			tok = r.Token
		default:
			if ok, owner, czxid := a.node(b, name); ok {
				t.Fatalf("round %d: nobody won, yet the node exists (owner %x, czxid %d)", n, owner, czxid)
			}
			r := mustAcquire(t, b, s, name)
			if !r.Won {
				t.Fatalf("round %d: Acquire of a free name = %+v, want won", n, r)
			}
			tok = r.Token
		}
		won := max(ra.Token, rc.Token)
		if won != 0 && won <= last {
			t.Fatalf("round %d: token %d, want more than the previous %d", n, won, last)
		}
		last = max(last, tok)
	}
	t.Logf("%d rounds", n)
	if got := owned(t, b, s, name); got[name] != tok {
		t.Fatalf("KeepAlive owns = %v, want %s:%d", got, name, tok)
	}
}

// rotate returns fs rotated left by n, so that the rounds start the calls
// in every order.
func rotate(n int, fs ...func()) []func() {
	k := n % len(fs)
	return append(fs[k:len(fs):len(fs)], fs[:k]...)
}

// TestNameLockOutlivesCallerAndBoundsWaiters: the lock of a name stays with
// the goroutine that sends the requests after its caller gave up; a call
// waiting for it gives up with its own ctx; once no call uses a name, the
// session keeps no lock for it.
func TestNameLockOutlivesCallerAndBoundsWaiters(t *testing.T) {
	b, servers := newTestBackend(t, Options{})
	p := newPauser(t, b)
	a := dialAdmin(t, servers)
	defer a.close()
	s := mustOpen(t, b, 5*time.Second)
	const name = "outlived"
	first := mustAcquire(t, b, s, name)
	if !first.Won {
		t.Fatal("first Acquire not won")
	}

	p.arm("release " + name)
	relCtx, cancelRel := context.WithCancel(context.Background())
	defer cancelRel()
	rel := start(func() (struct{}, error) { return struct{}{}, b.Release(relCtx, s, name, first.Token) })
	p.stopped(t, "Release")
	cancelRel()
	select {
	case r := <-rel:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Release whose ctx was cancelled = %v, want context.Canceled", r.err)
		}
	case <-time.After(stopWait):
		t.Fatal("Release did not return when its ctx was cancelled")
	}

	// The release's requests are not done: an acquire waits for them and
	// gives up with its own ctx.
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	began := time.Now()
	if r, err := b.Acquire(short, s, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while the release still runs = (%+v, %v), want context.DeadlineExceeded", r, err)
	}
	if waited := time.Since(began); waited > stopWait/2 {
		t.Fatalf("Acquire with a 100ms ctx returned after %v", waited)
	}
	acqCtx := ctx(t)
	acq := start(func() (simba.AcquireResult, error) { return b.Acquire(acqCtx, s, name) })
	if r, early := peek(acq, held); early {
		t.Fatalf("Acquire = (%+v, %v) while the abandoned release still held the name", r.v, r.err)
	}
	p.proceed()
	again := await(t, acq, "Acquire")
	if !again.Won || again.Token <= first.Token {
		t.Fatalf("Acquire after the release = %+v, want won with a token above %d", again, first.Token)
	}
	a.wantOwned(b, s, zid(t, b, s), name, again.Token, "the release ended before the acquire began")

	ss, err := b.session(s)
	if err != nil {
		t.Fatal(err)
	}
	// The acquire that gave up returned before its goroutine let go of
	// the lock's entry: wait for that goroutine, within bounds.
	for giveUp := time.Now().Add(stopWait); ; time.Sleep(10 * time.Millisecond) {
		ss.mu.Lock()
		left := len(ss.names)
		ss.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(giveUp) {
			t.Fatalf("the session keeps %d name locks %v after the last call, want 0", left, stopWait)
		}
	}
}
