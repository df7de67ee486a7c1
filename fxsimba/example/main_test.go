package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	simbaredis "github.com/simba-go/simba/backend-redis"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/fxsimba"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
)

// runMain makes the test binary run the example's main instead of the
// tests, so that a test can start the example as a process of its own.
const runMain = "SIMBA_FX_EXAMPLE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestSIGTERMStopsTheNodes: SIGTERM, what Kubernetes sends to stop a pod,
// stops the example as an interrupt does: every node's app stops, which
// hands its leases over, and the process exits with status 0 instead of
// being killed (status 143) with its leases held.
func TestSIGTERMStopsTheNodes(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-nodes", "2", "-duration", "1m")
	cmd.Env = append(os.Environ(), runMain+"=1")
	cmd.Stderr = io.Discard
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "node-2  started") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v, want exit status 0; output:\n%s", err, strings.Join(rest, "\n"))
	}
	for _, node := range []string{"node-1", "node-2"} {
		if !strings.Contains(strings.Join(rest, "\n"), node+"  stopped in ") {
			t.Errorf("%s did not stop:\n%s", node, strings.Join(rest, "\n"))
		}
	}
	checkStopTimes(t, strings.Join(rest, "\n"))
}

// checkStopTimes fails the test for a "stopped in D" line whose D is not
// a positive duration: a stop takes some time, which "stopped in 0s"
// (a millisecond rounding of a quick stop) hid.
func checkStopTimes(t *testing.T, out string) {
	t.Helper()
	stops := regexp.MustCompile(`stopped in (\S+)`).FindAllStringSubmatch(out, -1)
	if len(stops) == 0 {
		t.Fatalf("no node stopped:\n%s", out)
	}
	for _, m := range stops {
		if d, err := time.ParseDuration(m[1]); err != nil || d <= 0 {
			t.Errorf("%q: want a positive duration:\n%s", m[0], out)
		}
	}
}

func TestStopTime(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                       "0s",
		312*time.Microsecond + 400:              "312µs",
		999 * time.Microsecond:                  "999µs",
		time.Millisecond + 400*time.Microsecond: "1ms",
		1234567 * time.Microsecond:              "1.235s",
	} {
		if got := stopTime(d); got != want {
			t.Errorf("stopTime(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestDemoInMemory(t *testing.T) {
	var out bytes.Buffer
	s := settings{nodes: 2, duration: 2 * time.Second, lease: time.Second, logs: io.Discard}
	if err := demo(context.Background(), &out, s); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	got := out.String()
	checkStopTimes(t, got)
	for _, want := range []string{
		"node-1  runs report (token 1)", "node-1  runs cleanup (token 1)", "takes shard 3",
		"node-1  stopped", "node-2  runs report (token 2)", "node-2  stopped",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the output lacks %q:\n%s", want, got)
		}
	}
}

// redisURL returns SIMBA_TEST_REDIS_URL. Without it the test is skipped,
// unless CI is set: CI must never pass by skipping.
func redisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("SIMBA_TEST_REDIS_URL")
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SIMBA_TEST_REDIS_URL is not set and CI is: run tools/testenv/up redis")
		}
		t.Skip(`SIMBA_TEST_REDIS_URL is not set (eval "$(tools/testenv/up redis)")`)
	}
	return u
}

// spans records when each app's work ran: [start, end) per run.
type spans struct {
	mu   sync.Mutex
	runs []span
}

type span struct {
	app        string
	token      uint64
	start, end time.Time
}

func (s *spans) work(app string) simba.WorkFunc {
	return func(ctx context.Context, t *simba.Term) error {
		s.mu.Lock()
		i := len(s.runs)
		s.runs = append(s.runs, span{app: app, token: t.Token(), start: time.Now()})
		s.mu.Unlock()
		<-ctx.Done()
		time.Sleep(200 * time.Millisecond) // a work that takes a while to exit
		s.mu.Lock()
		s.runs[i].end = time.Now()
		s.mu.Unlock()
		return nil
	}
}

func (s *spans) get() []span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]span(nil), s.runs...)
}

// Two fx apps contend for one lease on a real Redis server: one runs the
// work at a time, and when the leader's app stops, the other takes over
// only after the leader's work exited.
func TestTwoAppsContendOnRedis(t *testing.T) {
	url := redisURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "simba-fxtest-" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { dropKeys(t, url, prefix) })
	var runs spans
	newApp := func(name string) *fxtest.App {
		return fxtest.New(t,
			fx.Provide(func(lc fx.Lifecycle) (simba.Backend, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				b, err := simbaredis.Open(ctx, url, simbaredis.Options{KeyPrefix: prefix})
				if err != nil {
					return nil, err
				}
				lc.Append(fx.StopHook(b.Close))
				return b, nil
			}),
			fx.Supply(simba.Config{LeaseDuration: 2 * time.Second}),
			fxsimba.Options,
			fxsimba.AsLeaderWork("report", runs.work(name)),
		)
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5s; runs %+v", what, runs.get())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	running := func(app string) bool {
		for _, r := range runs.get() {
			if r.app == app && r.end.IsZero() {
				return true
			}
		}
		return false
	}

	a, b2 := newApp("A"), newApp("B")
	a.RequireStart()
	eventually("A leads", func() bool { return running("A") })
	b2.RequireStart()
	time.Sleep(time.Second)
	if running("B") {
		t.Fatal("B runs the work while A leads")
	}
	a.RequireStop()
	stopped := time.Now()
	if running("A") {
		t.Fatal("A's work still runs after A's app stopped")
	}
	eventually("B takes over", func() bool { return running("B") })
	if took := time.Since(stopped); took > time.Second {
		t.Errorf("B took over %v after A stopped, want at once (Redis broadcasts releases)", took)
	}
	b2.RequireStop()

	got := runs.get()
	if len(got) != 2 || got[0].app != "A" || got[1].app != "B" {
		t.Fatalf("runs %+v, want one of A then one of B", got)
	}
	if !got[0].end.Before(got[1].start) {
		t.Fatalf("B's work began %v before A's work exited", got[0].end.Sub(got[1].start))
	}
	if got[1].token <= got[0].token {
		t.Fatalf("B's token %d is not above A's %d", got[1].token, got[0].token)
	}
}

// dropKeys deletes the keys the test left under prefix.
func dropKeys(t *testing.T, url, prefix string) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Errorf("ParseURL: %v", err)
		return
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("drop the test keys: %v", err)
	}
}
