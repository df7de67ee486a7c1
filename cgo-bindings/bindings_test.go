package main

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/cgo-bindings/internal/capi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if built.dir != "" {
			_ = os.RemoveAll(built.dir)
		}
	}))
}

// The tests of this file build libsimba.so with scripts/build.sh, compile
// the C example with the system cc, and run the Python package's tests
// (pytest) and the features (behave) against it. A missing tool skips a
// test here, and fails it under CI.

// missing skips the test, or fails it under CI, for a tool it needs.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI: a missing tool fails the test; tools/testenv installs it)", msg)
	}
	t.Skip(msg)
}

var built struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

// library builds libsimba.so, simba.h and simba.pc once per test binary
// into a temporary directory and returns it.
func library(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		missing(t, "cc not found: libsimba needs a C compiler")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "libsimba-") //nolint:usetesting // one build for every test of the binary, removed by TestMain
		if built.err != nil {
			return
		}
		cmd := exec.Command("sh", "scripts/build.sh", built.dir)
		built.out, built.err = cmd.CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("build libsimba: %v\n%s", built.err, built.out)
	}
	return built.dir
}

// TestHeader checks the contract: every function of simba.h is exported by
// the library and nothing else of ours is; the version and the status
// codes of the header are the library's.
func TestHeader(t *testing.T) {
	dir := library(t)
	header, err := os.ReadFile("include/simba.h")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^[a-z].*\b(simba_[a-z_]+)\(`).FindAllSubmatch(header, -1) {
		declared[string(m[1])] = true
	}
	f, err := elf.Open(filepath.Join(dir, "libsimba.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "simba_") && s.Section != elf.SHN_UNDEF {
			exported[s.Name] = true
		}
	}
	for name := range declared {
		if !exported[name] {
			t.Errorf("simba.h declares %s, the library does not export it", name)
		}
	}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "simbago_") && s.Section != elf.SHN_UNDEF {
			t.Errorf("the library exports %s: the Go side must stay local (libsimba.map)", s.Name)
		}
	}
	for name := range exported {
		if !declared[name] {
			t.Errorf("the library exports %s, simba.h does not declare it", name)
		}
	}
	if len(declared) < 20 {
		t.Errorf("found %d functions in simba.h", len(declared))
	}
	if !bytes.Contains(header, []byte(`#define SIMBA_VERSION "`+capi.Version+`"`)) {
		t.Errorf("SIMBA_VERSION of simba.h is not %s", capi.Version)
	}
	if !bytes.Contains(header, []byte("#define SIMBA_ABI_VERSION "+strconv.Itoa(capi.ABIVersion))) {
		t.Errorf("SIMBA_ABI_VERSION of simba.h is not %d", capi.ABIVersion)
	}
	codes := regexp.MustCompile(`(SIMBA_(?:OK|ERR_[A-Z_]+)) = (\d+),?`).FindAllSubmatch(header, -1)
	if len(codes) != int(capi.LastStatus)+1 {
		t.Errorf("simba.h has %d status codes, the library %d", len(codes), capi.LastStatus+1)
	}
	for _, m := range codes {
		n, _ := strconv.Atoi(string(m[2]))
		if got := capi.Status(n).String(); got != string(m[1]) {
			t.Errorf("status %d is %s in simba.h, %s in the library", n, m[1], got)
		}
	}
}

// compile builds the C example against the built library.
func compile(t *testing.T) string {
	t.Helper()
	dir := library(t)
	exe := filepath.Join(t.TempDir(), "example")
	cmd := exec.Command("cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", dir,
		"-o", exe, "examples/c/example.c", "-L", dir, "-Wl,-rpath,"+dir, "-lsimba", "-lpthread")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return exe
}

// backends returns the URLs the examples run against: memory, and Redis
// when the test servers run (under CI they must).
func backends(t *testing.T) map[string]string {
	m := map[string]string{"memory": "memory://c-example"}
	if u := os.Getenv("SIMBA_TEST_REDIS_URL"); u != "" {
		m["redis"] = u
	} else if os.Getenv("CI") != "" {
		t.Fatal("SIMBA_TEST_REDIS_URL is not set (make test sets it)")
	} else {
		t.Log("SIMBA_TEST_REDIS_URL is not set: the example runs on memory:// only")
	}
	return m
}

func run(t *testing.T, timeout time.Duration, cmd *exec.Cmd) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Dir, c.Env = cmd.Dir, cmd.Env
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

func TestCExample(t *testing.T) {
	exe := compile(t)
	urls := backends(t)
	if zk := os.Getenv("SIMBA_TEST_ZK_SERVERS"); zk != "" {
		urls["zk"] = "zk://" + zk // the same library opens every linked backend
	}
	for backend, url := range urls {
		for _, mode := range []string{"lock", "election"} {
			t.Run(backend+"/"+mode, func(t *testing.T) {
				out := run(t, time.Minute, exec.Command(exe, url, mode))
				t.Log(out)
				for _, want := range []string{"no handle left open"} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q", want)
					}
				}
				if mode == "lock" && !regexp.MustCompile(`job step 0 under token [1-9]`).MatchString(out) {
					t.Error("the job did not print its token")
				}
				if mode == "election" && !strings.Contains(out, "user_data released") {
					t.Error("the election's release function did not run")
				}
				if mode == "election" {
					validSnapshots(t, out)
				}
			})
		}
	}
}

// python returns a python3 that can import every module, the Debian one
// when the first on PATH lacks them.
func python(t *testing.T, modules ...string) string {
	t.Helper()
	candidates := []string{os.Getenv("SIMBA_PYTHON"), "python3", "/usr/bin/python3"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		args := []string{"-c", "import " + strings.Join(modules, ", ")}
		if exec.Command(path, args...).Run() == nil {
			return path
		}
	}
	missing(t, "no python3 that imports %s (Debian: python3-pytest, python3-behave)", strings.Join(modules, ", "))
	return ""
}

// pythonEnv is the environment of the Python runs: the built library, the
// test servers and CI as this process has them.
func pythonEnv(t *testing.T) []string {
	dir := library(t)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PYTHON") })
	return append(env, "SIMBA_LIBRARY="+filepath.Join(dir, "libsimba.so"), "PYTHONDONTWRITEBYTECODE=1")
}

func TestPython(t *testing.T) {
	py := python(t, "pytest")
	cmd := exec.Command(py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests")
	cmd.Dir, cmd.Env = "python", pythonEnv(t)
	t.Log(run(t, 5*time.Minute, cmd))
}

func TestFeatures(t *testing.T) {
	py := python(t, "behave")
	for backend := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			cmd := exec.Command(py, "-m", "behave", "--no-color", "-f", "progress", "-D", "backend="+backend, "features")
			cmd.Env = pythonEnv(t)
			t.Log(run(t, 5*time.Minute, cmd))
		})
	}
}

// BenchmarkCABIAcquireRelease measures acquire+release+free through the C
// API on the memory backend, in a C program; compare with
// internal/capi's BenchmarkGoAcquireRelease.
func BenchmarkCABIAcquireRelease(b *testing.B) {
	dir := library(b)
	exe := filepath.Join(b.TempDir(), "example")
	cc := exec.Command("cc", "-O2", "-std=c11", "-I", dir, "-o", exe, "examples/c/example.c", "-L", dir, "-Wl,-rpath,"+dir, "-lsimba", "-lpthread")
	if out, err := cc.CombinedOutput(); err != nil {
		b.Fatalf("cc: %v\n%s", err, out)
	}
	b.ResetTimer()
	out, err := exec.Command(exe, "memory://bench", "bench", strconv.Itoa(max(b.N, 1000))).CombinedOutput()
	if err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	m := regexp.MustCompile(`([0-9.]+) ns/op`).FindSubmatch(out)
	if m == nil {
		b.Fatalf("no ns/op in %s", out)
	}
	ns, _ := strconv.ParseFloat(string(m[1]), 64)
	b.ReportMetric(ns, "c-ns/op")
}

// abiCheckOnEveryBackend runs the check mode of abi_check against each
// test backend, as a subtest per backend that fails when the check does,
// and returns what each run printed, by backend.
func abiCheckOnEveryBackend(t *testing.T, mode string) map[string]string {
	t.Helper()
	exe := abiCheck(t)
	outs := map[string]string{}
	for backend, url := range backends(t) {
		t.Run(backend, func(t *testing.T) {
			outs[backend] = run(t, time.Minute, exec.Command(exe, mode, url))
			t.Log(outs[backend])
		})
	}
	return outs
}

// abiCheck compiles testdata/abi_check.c against the built library.
func abiCheck(t *testing.T) string {
	t.Helper()
	dir := library(t)
	exe := filepath.Join(t.TempDir(), "abi_check")
	cmd := exec.Command("cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", dir,
		"-o", exe, "testdata/abi_check.c", "-L", dir, "-Wl,-rpath,"+dir, "-lsimba", "-lpthread")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return exe
}

// TestLastErrorFreedAtThreadExit: each thread that made a failing call
// keeps its message until it exits, not for the life of the process.
func TestLastErrorFreedAtThreadExit(t *testing.T) {
	out := run(t, 3*time.Minute, exec.Command(abiCheck(t), "threads", "40000"))
	t.Log(out)
}

// TestStopTimeoutReleasesUserData: after a stop or close that timed out,
// the release function of the election runs once its last callback
// returned, and no callback comes after it.
func TestStopTimeoutReleasesUserData(t *testing.T) {
	abiCheckOnEveryBackend(t, "stop-timeout")
}

// TestStopFromCallback: a stop called from a callback of its own election
// returns at once, and no callback comes after it (simba.h).
func TestStopFromCallback(t *testing.T) {
	abiCheckOnEveryBackend(t, "stop-in-callback")
}

// TestTimeoutBounds: a timeout of 0 makes one attempt, like a
// try-acquire; INT64_MAX ms waits the maximum instead of being refused.
func TestTimeoutBounds(t *testing.T) {
	abiCheckOnEveryBackend(t, "timeouts")
}

// TestSemaphoresInC: permits up to n, SIMBA_ERR_PERMITS_MISMATCH, the term
// functions on a permit, and a clear status for every bad argument, on the
// memory backend (abi_check semaphores).
func TestSemaphoresInC(t *testing.T) {
	out := run(t, time.Minute, exec.Command(abiCheck(t), "semaphores", "memory://abi-semaphores"))
	t.Log(out)
	if !strings.Contains(out, "no handle left open") {
		t.Error("the output lacks the handle check")
	}
}

// TestForkedChild: a child forked from a process that loaded the library
// sees no valid term, and every call fails at once with a message that
// says what to do instead of hanging.
func TestForkedChild(t *testing.T) {
	for backend, out := range abiCheckOnEveryBackend(t, "fork") {
		if !strings.Contains(out, "SIMBA_ERR_FORKED") {
			t.Errorf("%s: the child's calls did not fail with SIMBA_ERR_FORKED", backend)
		}
	}
}

// TestNoCredentialInMessages opens URLs that carry a password, in every
// form the backends accept, on servers that refuse or do not answer: no
// message of the C API may quote the password.
func TestNoCredentialInMessages(t *testing.T) {
	const secret = "S3CRETpw"
	urls := []string{
		"redis://user:" + secret + "@127.0.0.1:1/0",
		"redis://127.0.0.1:1/0?password=" + secret + "&protocol=9",
		"redis://127.0.0.1:1/0?password=" + secret,
		"rediss://:" + secret + "@127.0.0.1:1/0?protocol=9",
		"redis://127.0.0.1:1/0?sentinel_password=" + secret + "&master_name=m&addr=127.0.0.1:2",
		"redis://127.0.0.1:1/0?username=u&password=" + secret + "&db=x",
		"postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=disable",
		"postgres://u@127.0.0.1:1/db?password=" + secret + "&sslmode=disable",
		"postgresql://127.0.0.1:1/db?password=" + secret + "&sslmode=bogus",
		"postgres://u:" + secret + "@127.0.0.1:1/db?pool_max_conns=x",
		"mysql://u:" + secret + "@tcp(127.0.0.1:1)/db",
		"mysql://u:" + secret + "@tcp(127.0.0.1:1)/db?parseTime=maybe",
		"mysql://u:" + secret + "@127.0.0.1:1/db",
		"zk://u:" + secret + "@127.0.0.1:1",
		"nosuchscheme://u:" + secret + "@host/db?password=" + secret,
	}
	if u := os.Getenv("SIMBA_TEST_REDIS_URL"); u != "" {
		// The server answers, and refuses the password.
		if i := strings.Index(u, "://"); i >= 0 {
			urls = append(urls, u[:i+3]+"nobody:"+secret+"@"+u[i+3:])
		}
	}
	out := run(t, 2*time.Minute, exec.Command(abiCheck(t), append([]string{"credentials"}, urls...)...))
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		_, msg, ok := strings.Cut(line, " => ")
		if !ok {
			t.Errorf("unexpected line %q", line)
			continue
		}
		if strings.Contains(msg, secret) {
			t.Errorf("the message quotes the password: %s", line)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// TestStatusNamesInC: simba_status_name, answered by the C side of the
// library, names every status as simba.h and internal/capi do.
func TestStatusNamesInC(t *testing.T) {
	out := run(t, time.Minute, exec.Command(abiCheck(t), "names"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != int(capi.LastStatus)+1 {
		t.Errorf("simba_status_name names %d statuses, the library has %d", len(lines), capi.LastStatus+1)
	}
	for _, line := range lines {
		n, name, _ := strings.Cut(line, " ")
		i, _ := strconv.Atoi(n)
		if want := capi.Status(i).String(); name != want {
			t.Errorf("simba_status_name(%d) = %s, want %s", i, name, want)
		}
	}
}

// TestEngineInC: the holder, event, leader work and group calls through
// the C ABI on every test backend, and their refusal of NULL pointers, bad
// handles and bad struct sizes (abi_check engine).
func TestEngineInC(t *testing.T) {
	for backend, out := range abiCheckOnEveryBackend(t, "engine") {
		for _, want := range []string{"identity=abi-node-a", "event: REVOKED", "reason=STOPPED", "partitions run=0x7", "no handle left open"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the output lacks %q", backend, want)
			}
		}
	}
}

// TestReasonNamesInC: simba_reason_name, answered by the C side of the
// library, names every reason as the engine does.
func TestReasonNamesInC(t *testing.T) {
	out := run(t, time.Minute, exec.Command(abiCheck(t), "reasons"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 9 {
		t.Fatalf("abi_check reasons printed %d lines:\n%s", len(lines), out)
	}
	for _, line := range lines {
		n, name, _ := strings.Cut(line, " ")
		i, _ := strconv.Atoi(n)
		if want := capi.ReasonName(int32(i)); name != want {
			t.Errorf("simba_reason_name(%d) = %s, want %s", i, name, want)
		}
	}
}
