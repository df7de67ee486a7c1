package features

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// defaultTiming is the timing of every node unless a scenario sets its own:
// short enough for real servers, with room for a loaded machine.
var defaultTiming = simba.Config{LeaseDuration: 2 * time.Second, RenewInterval: 500 * time.Millisecond}

// world is the state of one scenario: its nodes, the backend they share and
// what the steps have observed. Steps run one at a time; on the memory
// backend they run inside the scenario's synctest bubble.
type world struct {
	env      *backendEnv
	id       string       // appended to lease names, to keep scenarios apart on shared servers
	timing   simba.Config // the timing of the nodes connected next
	mem      *memory.Server
	bub      *bubble
	nodes    map[string]*node
	cli      bool                   // a scenario about the simba command (@cli): in real time
	procs    map[string]*simbaProc  // its simba processes, by number
	sessions map[string]*rawSession // sessions opened directly on the backend, by name

	ctx    context.Context // ends with the scenario: background work stops then
	cancel context.CancelFunc

	// The scenario's own things, each named by the steps that use it.
	configs    map[string]simba.Config    // by name
	takers     map[string]simba.SessionID // by lease: the session that took it over
	takenAt    map[string]time.Time       // by lease: when it was taken over
	leaseCap   time.Duration              // the most the backend grants; 0: no cap
	fences     []fenced                   // the fenced values of the scenario
	subscriber io.Closer                  // a subscription to the backend's release channel
}

func newWorld(env *backendEnv) *world {
	return &world{
		env:      env,
		id:       randomID(3),
		timing:   defaultTiming,
		nodes:    make(map[string]*node),
		procs:    make(map[string]*simbaProc),
		sessions: make(map[string]*rawSession),
		configs:  make(map[string]simba.Config),
		takers:   make(map[string]simba.SessionID),
		takenAt:  make(map[string]time.Time),
	}
}

// start runs when the scenario begins: on the memory backend it opens the
// scenario's bubble and its store inside it. A scenario about the simba
// command runs outside any bubble: its processes live in real time.
func (w *world) start() error {
	if w.env.fake && !w.cli {
		w.bub = startBubble(w.env.t)
	}
	return w.run(func() error {
		w.ctx, w.cancel = context.WithCancel(context.Background())
		if w.env.name == backendMemory {
			w.mem = memory.New()
		}
		return nil
	})
}

// finish runs when the scenario ends, whatever its outcome: it lets held
// answers through, heals every connection, closes every client and backend,
// and, on the memory backend, checks that nothing is left running in the
// bubble.
func (w *world) finish() error {
	err := w.run(func() error {
		w.cancel()
		errs := []error{w.stopSimbas()}
		for _, n := range w.sortedNodes() {
			n.rec.end()
			n.link.Heal()
		}
		for _, n := range w.sortedNodes() {
			// Errors of the backend at close are not what scenarios check;
			// a Close that does not return is.
			ctx, cancel := context.WithTimeout(context.Background(), max(4*w.lease(n.timing), time.Minute))
			for _, c := range n.clients {
				if err := c.Close(ctx); err != nil && ctx.Err() != nil {
					errs = append(errs, fmt.Errorf("node %s: close did not return: %w", n.name, err))
				}
			}
			cancel()
			n.wg.Wait()
			n.closeBackend()
		}
		for _, r := range w.sessions {
			r.close()
		}
		if w.subscriber != nil {
			_ = w.subscriber.Close()
		}
		return errors.Join(append(errs, w.dropCLIKeys())...)
	})
	if w.bub != nil {
		err = errors.Join(err, w.bub.stop())
	}
	return err
}

func (w *world) sortedNodes() []*node {
	names := make([]string, 0, len(w.nodes))
	for name := range w.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]*node, len(names))
	for i, name := range names {
		out[i] = w.nodes[name]
	}
	return out
}

// run runs f as a step of the scenario: in its bubble on the memory
// backend, directly elsewhere.
func (w *world) run(f func() error) error {
	if w.bub == nil {
		return f()
	}
	return w.bub.run(f)
}

var errorType = reflect.TypeFor[error]()

// bubble runs the steps of one scenario inside a synctest bubble, so that
// the engine, the memory store and the steps share a fake clock: waiting is
// instant and every instant is exact. Between steps the bubble's clock
// stands still.
type bubble struct {
	steps chan func()
	done  chan error
}

// settle is how long the bubble lets its clock run after the last step, so
// that every timer of the scenario fires. A goroutine still blocked after
// that is a leak, and fails the scenario.
const settle = 10 * time.Minute

func startBubble(t *testing.T) *bubble {
	b := &bubble{steps: make(chan func()), done: make(chan error, 1)}
	go func() {
		var err error
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("goroutines left running after the scenario: %v", r)
			}
			b.done <- err
		}()
		synctest.Test(t, func(*testing.T) {
			for f := range b.steps {
				f()
			}
			time.Sleep(settle)
		})
	}()
	return b
}

// run runs f in the bubble and returns its error; a panic becomes an error.
func (b *bubble) run(f func() error) error {
	res := make(chan error, 1)
	b.steps <- func() {
		defer func() {
			if r := recover(); r != nil {
				res <- fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		res <- f()
	}
	return <-res
}

// stop ends the bubble and reports a leak.
func (b *bubble) stop() error {
	close(b.steps)
	return <-b.done
}

// Time.

// lease returns the lease duration of cfg, defaults filled in.
func (w *world) lease(cfg simba.Config) time.Duration { return resolved(cfg).LeaseDuration }

// resolved returns cfg with its defaults, as a client would use it.
func resolved(cfg simba.Config) simba.Config {
	d := simba.DefaultConfig()
	if cfg.LeaseDuration != 0 {
		d.LeaseDuration = cfg.LeaseDuration
		d.RenewInterval = cfg.LeaseDuration / 3
	}
	if cfg.RenewInterval != 0 {
		d.RenewInterval = cfg.RenewInterval
	}
	d.RetryJitter = d.RenewInterval / 2
	if cfg.RetryJitter != 0 {
		d.RetryJitter = cfg.RetryJitter
	}
	if cfg.Drift != 0 || cfg.NoDrift {
		d.Drift = cfg.Drift
	}
	if cfg.Margin != 0 || cfg.NoMargin {
		d.Margin = cfg.Margin
	}
	if cfg.MinBackoff != 0 {
		d.MinBackoff = cfg.MinBackoff
	}
	return d
}

// dur reads a duration phrase against cfg: "one lease duration", "3 renew
// intervals", "half a renew interval", "no time", or a Go duration.
func (w *world) dur(phrase string, cfg simba.Config) (time.Duration, error) {
	c := resolved(cfg)
	p := strings.TrimSpace(phrase)
	if p == "no time" {
		return 0, nil
	}
	if d, err := time.ParseDuration(p); err == nil {
		return d, nil
	}
	count, unit, ok := strings.Cut(p, " ")
	if !ok {
		return 0, fmt.Errorf("features: cannot read %q as a duration", phrase)
	}
	var k float64
	switch count {
	case "one", "a":
		k = 1
	case "two":
		k = 2
	case "half":
		k = 0.5
		unit = strings.TrimPrefix(unit, "a ")
	default:
		n, err := strconv.Atoi(count)
		if err != nil {
			return 0, fmt.Errorf("features: cannot read %q as a duration", phrase)
		}
		k = float64(n)
	}
	switch strings.TrimSuffix(unit, "s") {
	case "lease duration":
		return time.Duration(k * float64(c.LeaseDuration)), nil
	case "renew interval":
		return time.Duration(k * float64(c.RenewInterval)), nil
	}
	return 0, fmt.Errorf("features: cannot read %q as a duration", phrase)
}

// fakeTime reports whether the scenario runs on the fake clock: on the
// memory backend, unless it is about the simba command.
func (w *world) fakeTime() bool { return w.env.fake && !w.cli }

// cliTiming is the timing simba processes are given: the scenario's lease
// duration, as --lease, and simba's renew interval, a third of it.
func (w *world) cliTiming() simba.Config {
	return simba.Config{LeaseDuration: w.lease(w.timing)}
}

// grace widens an upper time bound on real servers, where scheduling and
// the network add delays; on the fake clock bounds are exact.
func (w *world) grace(d time.Duration) time.Duration {
	if w.fakeTime() {
		return d
	}
	return d + d/4 + 250*time.Millisecond
}

// tolerance is how far apart two instants may be and still count as the
// same: a millisecond on the fake clock (rounding of drift), more on real
// servers.
func (w *world) tolerance() time.Duration {
	if w.fakeTime() {
		return time.Millisecond
	}
	return 150 * time.Millisecond
}

// poll is the pause between two checks of a condition.
func (w *world) poll() time.Duration {
	if w.fakeTime() {
		return time.Millisecond
	}
	return 5 * time.Millisecond
}

// settle lets every goroutine of the bubble finish what it can do at the
// current instant, so that a check sees the state the engine reaches at that
// instant, not a state half-way through. Outside a bubble it does nothing.
func (w *world) settle() {
	if w.bub != nil {
		synctest.Wait()
	}
}

// eventually waits until cond holds, for at most within (with grace).
func (w *world) eventually(within time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(w.grace(within))
	for {
		w.settle()
		if cond() {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s: not within %v", what, within)
		}
		time.Sleep(w.poll())
	}
}

// never checks that cond stays false for d.
func (w *world) never(d time.Duration, what string, cond func() bool) error {
	end := time.Now().Add(d)
	for {
		w.settle()
		if cond() {
			return fmt.Errorf("%s, within %v", what, d)
		}
		if !time.Now().Before(end) {
			return nil
		}
		time.Sleep(w.poll())
	}
}

// Names.

// name returns the lease a scenario means by n: n with the scenario's id
// appended, so scenarios never share a lease on a shared server. In a
// scenario about the simba command the id comes first, so that a name
// prefix (simba status --list --prefix) keeps to the scenario's leases too.
func (w *world) name(n string) string {
	if w.cli {
		return w.id + "." + n
	}
	return n + "." + w.id
}

// node returns the node called name.
func (w *world) node(name string) (*node, error) {
	n, ok := w.nodes[name]
	if !ok {
		return nil, fmt.Errorf("features: no node %s in this scenario", name)
	}
	return n, nil
}

// logCapture keeps the records a client logs at warning level or above.
type logCapture struct {
	mu      sync.Mutex
	records []string
}

func (l *logCapture) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}

func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

func (l *logCapture) warnings(containing string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if strings.HasPrefix(r, "WARN") && strings.Contains(r, containing) {
			n++
		}
	}
	return n
}

// nodeDur returns node name and a duration phrase read against its timing.
func (w *world) nodeDur(name, phrase string) (*node, time.Duration, error) {
	n, err := w.node(name)
	if err != nil {
		return nil, 0, err
	}
	d, err := n.dur(phrase)
	return n, d, err
}

// termDur returns the term of name steps mean for lease, and a duration
// phrase read against the node's timing.
func (w *world) termDur(name, lease, phrase string) (*node, *simba.Term, time.Duration, error) {
	n, t, err := w.term(name, lease)
	if err != nil {
		return nil, nil, 0, err
	}
	d, err := n.dur(phrase)
	return n, t, d, err
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
