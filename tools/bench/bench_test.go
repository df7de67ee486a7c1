package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tinySettings runs every measurement for a few milliseconds.
func tinySettings(backends ...string) (settings, *bytes.Buffer, *bytes.Buffer) {
	var out, log bytes.Buffer
	s := defaultSettings(true)
	s.backends = backends
	s.duration = 20 * time.Millisecond
	s.warmup = 5 * time.Millisecond
	s.rounds = 2
	s.window = 300 * time.Millisecond
	s.kaRounds = 1
	s.leases = []int{1, 3}
	s.renew = 200 * time.Millisecond
	s.kaTimings = 2
	s.handovers = 1
	s.waiters = []int{1, 3}
	s.names = 50
	s.sqlNames = 40
	s.listHeld = 250
	s.settle = 30 * time.Millisecond
	s.out, s.log = &out, &log
	return s, &out, &log
}

// serverEnv returns the variable v, skipping the test without it (failing
// when CI is set: the server must run there).
func serverEnv(t *testing.T, v string) string {
	t.Helper()
	s := os.Getenv(v)
	if s == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set and CI is: the server must run", v)
		}
		t.Skipf("%s is not set", v)
	}
	return s
}

// parsed is an output line split into its fields.
type parsed struct {
	id     lineID
	fields map[string]float64
}

func parseLines(t *testing.T, out string) []parsed {
	t.Helper()
	var got []parsed
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 7 || f[0] != "bench" {
			t.Fatalf("not a bench line: %q", line)
		}
		p := parsed{fields: map[string]float64{}}
		for i, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("field %q of %q is not key=value", kv, line)
			}
			want := []string{"backend", "impl", "op", "ops_s", "p50_us", "p99_us"}
			if i < len(want) && k != want[i] {
				t.Fatalf("field %d of %q is %q, want %q", i+1, line, k, want[i])
			}
			switch k {
			case "backend":
				p.id.backend = v
			case "impl":
				p.id.impl = v
			case "op":
				p.id.op = v
			default:
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("field %s of %q: %v", k, line, err)
				}
				p.fields[k] = n
			}
		}
		got = append(got, p)
	}
	return got
}

// checkLines asserts that out holds exactly the lines of want, in order,
// each with a positive throughput and p50 <= p99.
func checkLines(t *testing.T, out string, want []lineID) []parsed {
	t.Helper()
	got := parseLines(t, out)
	ids := make([]lineID, len(got))
	for i, p := range got {
		ids[i] = p.id
		if p.fields["p50_us"] > p.fields["p99_us"] {
			t.Errorf("%v: p50 %v > p99 %v", p.id, p.fields["p50_us"], p.fields["p99_us"])
		}
		if !strings.HasPrefix(p.id.op, "keepalive_") && p.fields["ops_s"] <= 0 {
			t.Errorf("%v: ops_s = %v, want > 0", p.id, p.fields["ops_s"])
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("lines:\n%v\nwant:\n%v\noutput:\n%s", ids, want, out)
	}
	return got
}

func TestRunMemory(t *testing.T) {
	s, out, log := tinySettings("memory")
	if err := run(context.Background(), s, func(string) string { return "" }); err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	checkLines(t, out.String(), []lineID{
		{"memory", "simba", "acquire_release"},
		{"memory", "simba", "acquire_release_c64"},
		{"memory", "floor", "acquire_release"},
		{"memory", "floor", "acquire_release_c64"},
		{"memory", "simba", opSemaphore},
		{"memory", "simba", opSemaphoreMany(semMany)},
		{"memory", "simba", opSemaphoreContended(semShared)},
		{"memory", "floor", opSemaphore},
		{"memory", "floor", opSemaphoreMany(semMany)},
		{"memory", "floor", opSemaphoreContended(semShared)},
		{"memory", "simba", "handover"},
		{"memory", "simba", opListPage(250)},
	})
}

func TestOpAcquireMany(t *testing.T) {
	if got := opAcquireMany(64); got != opAcquireC64 {
		t.Errorf("opAcquireMany(64) = %q, want %q", got, opAcquireC64)
	}
	if got := opAcquireMany(sqlWorkers); got != opAcquireC16 {
		t.Errorf("opAcquireMany(%d) = %q, want %q", sqlWorkers, got, opAcquireC16)
	}
}

func TestSkipsBackendsWithoutServer(t *testing.T) {
	s, out, log := tinySettings("redis", "postgres", "mysql", "zk")
	if err := run(context.Background(), s, func(string) string { return "" }); err != nil {
		t.Fatalf("run: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("output without servers: %q", out)
	}
	for _, v := range []string{"SIMBA_TEST_REDIS_URL", "SIMBA_TEST_POSTGRES_URL", "SIMBA_TEST_MYSQL_URL", "SIMBA_TEST_ZK_SERVERS"} {
		if !strings.Contains(log.String(), "skipped: "+v+" is not set") {
			t.Errorf("no skip note for %s in %q", v, log)
		}
	}
}

// fakeCase records the order of its rounds and can fail on one.
type fakeCase struct {
	name   string
	failAt int // round number (1-based) that fails; 0: none
	order  *[]string
	rounds int
}

func (f *fakeCase) id() lineID { return lineID{"memory", f.name, opAcquireRelease} }

func (f *fakeCase) round(context.Context) (sample, error) {
	f.rounds++
	*f.order = append(*f.order, f.name)
	if f.rounds == f.failAt {
		return sample{}, errors.New("boom")
	}
	return sample{opsS: float64(100 * f.rounds), p50: time.Duration(f.rounds) * time.Microsecond, p99: 10 * time.Microsecond,
		extra: []metric{{"calls_s", float64(f.rounds)}}}, nil
}

func TestInterleave(t *testing.T) {
	var order []string
	g := group{rounds: 3, cases: []benchCase{
		&fakeCase{name: "a", order: &order},
		&fakeCase{name: "b", order: &order, failAt: 2},
		&fakeCase{name: "c", order: &order},
	}}
	var out, log bytes.Buffer
	err := interleave(context.Background(), g, &out, &log)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("err = %v, want the failure of b", err)
	}
	if want := []string{"a", "b", "c", "a", "b", "c", "a", "c"}; !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v (interleaved, b dropped after its failure)", order, want)
	}
	want := "bench backend=memory impl=a op=acquire_release ops_s=200 p50_us=2.0 p99_us=10.0 calls_s=2.0\n" +
		"bench backend=memory impl=c op=acquire_release ops_s=200 p50_us=2.0 p99_us=10.0 calls_s=2.0\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", &out, want)
	}
	if !strings.Contains(log.String(), "memory b acquire_release: round 2: boom") {
		t.Errorf("log = %q, want the failure of b", &log)
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		give []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(slices.Clone(tt.give)); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(i + 1)
	}
	for _, tt := range []struct {
		give float64
		want time.Duration
	}{
		{0.50, 50},
		{0.99, 99},
		{1, 100},
		{0.001, 1},
	} {
		if got := percentile(d, tt.give); got != tt.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", tt.give, got, tt.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil) = %v, want 0", got)
	}
}

func TestNumber(t *testing.T) {
	for _, tt := range []struct {
		give float64
		want string
	}{
		{12345.6, "12346"},
		{100, "100"},
		{42.26, "42.3"},
		{0.8, "0.80"},
		{0, "0.00"},
	} {
		if got := number(tt.give); got != tt.want {
			t.Errorf("number(%v) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestSumCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_get:calls=12,usec=7,usec_per_call=0.58,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|list:calls=3,usec=41,usec_per_call=13.67,rejected_calls=0,failed_calls=0\r\n" +
		"\r\n"
	got, err := sumCommandStats(info)
	if err != nil || got != 15 {
		t.Errorf("sumCommandStats = %d, %v; want 15", got, err)
	}
	if _, err := sumCommandStats("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Error("sumCommandStats accepted a calls field that is not a number")
	}
}

func TestParseFlags(t *testing.T) {
	s, err := parseFlags([]string{"-backends", "redis, zk", "-duration", "1s", "-rounds", "2", "-leases", "1,50"}, true, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.backends, []string{"redis", "zk"}) || s.duration != time.Second || s.rounds != 2 || !slices.Equal(s.leases, []int{1, 50}) {
		t.Errorf("settings = %+v", s)
	}
	if q, f := defaultSettings(true), defaultSettings(false); q.window >= f.window || q.duration >= f.duration {
		t.Errorf("quick settings are not shorter: %+v vs %+v", q, f)
	}
	var stderr bytes.Buffer
	for _, args := range [][]string{
		{"-backends", "etcd"},
		{"-duration", "0s"},
		{"-rounds", "0"},
		{"-leases", "1,x"},
		{"extra"},
	} {
		if _, err := parseFlags(args, false, &stderr); err == nil {
			t.Errorf("parseFlags(%q) accepted bad input", args)
		}
	}
}

// TestServers runs every suite for a few milliseconds against the test
// servers: without a server's variable it skips, or fails when CI is set.
func TestServers(t *testing.T) {
	ka := func(backend string, impls ...string) []lineID {
		var out []lineID
		for _, n := range []int{1, 3} {
			for _, im := range impls {
				out = append(out, lineID{backend, im, opKeepAlive(n)})
			}
		}
		return out
	}
	lines := func(backend string, impls []string, many string) []lineID {
		var out []lineID
		for _, im := range impls {
			out = append(out, lineID{backend, im, opAcquireRelease})
			if many != "" {
				out = append(out, lineID{backend, im, many})
			}
		}
		return out
	}
	sem := func(backend string, impls ...string) []lineID {
		var out []lineID
		for _, im := range impls {
			for _, sh := range semShapes {
				out = append(out, lineID{backend, im, sh.op})
			}
		}
		return out
	}
	for _, tt := range []struct {
		backend string
		want    []lineID
	}{
		{"redis", slices.Concat(lines("redis", []string{"simba", "simba_async", "spi", "redislock", "redsync", "floor"}, opAcquireC64), sem("redis", "simba", "floor"),
			[]lineID{{"redis", "simba", "handover"}, {"redis", "simba", opHandoverW(1)}, {"redis", "simba", opHandoverW(3)}, {"redis", "simba", opStateNames(50)}, {"redis", "simba", opListPage(250)}},
			ka("redis", "simba", "redislock"))},
		{"postgres", slices.Concat(lines("postgres", []string{"simba", "lean", "advisory"}, opAcquireC16), lines("postgres", []string{"floor"}, ""), sem("postgres", "simba"),
			[]lineID{{"postgres", "simba", opStateNames(40)}, {"postgres", "simba", opListPage(250)},
				{"postgres", "simba", "handover"}, {"postgres", "simba", opHandoverW(1)}, {"postgres", "simba", opHandoverW(3)}}, ka("postgres", "simba"))},
		{"mysql", slices.Concat(lines("mysql", []string{"simba", "lean", "getlock"}, opAcquireC16), lines("mysql", []string{"floor"}, ""), sem("mysql", "simba"),
			[]lineID{{"mysql", "simba", opStateNames(40)}, {"mysql", "simba", opListPage(250)}, {"mysql", "simba", "handover"}}, ka("mysql", "simba"))},
		{"zk", slices.Concat(lines("zk", []string{"simba", "spi", "zklock", "floor"}, ""), sem("zk", "simba"),
			[]lineID{{"zk", "simba", "handover"}, {"zk", "zklock", "handover"}, {"zk", "simba", opHandoverW(1)}, {"zk", "simba", opHandoverW(3)}, {"zk", "simba", opListPage(250)}})},
	} {
		t.Run(tt.backend, func(t *testing.T) {
			serverEnv(t, specs[tt.backend].envVar)
			s, out, log := tinySettings(tt.backend)
			if err := run(context.Background(), s, os.Getenv); err != nil {
				t.Fatalf("run: %v\n%s", err, log)
			}
			got := checkLines(t, out.String(), tt.want)
			for _, p := range got {
				if strings.HasPrefix(p.id.op, "keepalive_") {
					// Renewals every 200ms in a window of 300ms: every
					// backend's keep-alive sends something in it.
					if c, ok := p.fields["calls_s"]; !ok || c <= 0 {
						t.Errorf("%v: calls_s = %v (present: %v), want > 0", p.id, c, ok)
					}
				}
			}
		})
	}
}

// TestLoopCompletesOneOpPerWorker: a round whose end has passed before
// its workers run still counts one operation of each, so a goroutine
// scheduled late on a loaded machine cannot empty a short warm-up.
func TestLoopCompletesOneOpPerWorker(t *testing.T) {
	var ops [3]int
	l := &loop{workers: len(ops), op: func(_ context.Context, w int) error { ops[w]++; return nil }}
	s, err := l.run(t.Context(), 0)
	if err != nil {
		t.Fatalf("run with a zero duration: %v", err)
	}
	if ops != [3]int{1, 1, 1} {
		t.Errorf("operations per worker = %v, want one each", ops)
	}
	if s.opsS <= 0 {
		t.Errorf("throughput %v, want > 0", s.opsS)
	}
}
