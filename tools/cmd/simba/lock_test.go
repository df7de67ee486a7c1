package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

var memoryURLs struct {
	sync.Mutex
	m map[*testing.T]string
	n int
}

// memoryURL returns the memory:// URL of a store private to the test, the
// same for every call of one test, a new one for each run (-count).
func memoryURL(t *testing.T) string {
	memoryURLs.Lock()
	defer memoryURLs.Unlock()
	if u, ok := memoryURLs.m[t]; ok {
		return u
	}
	if memoryURLs.m == nil {
		memoryURLs.m = make(map[*testing.T]string)
	}
	memoryURLs.n++
	u := fmt.Sprintf("memory://%s-%d", strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()), memoryURLs.n)
	memoryURLs.m[t] = u
	t.Cleanup(func() {
		memoryURLs.Lock()
		defer memoryURLs.Unlock()
		delete(memoryURLs.m, t)
	})
	return u
}

func TestLockPassesTokenAndLease(t *testing.T) {
	url := memoryURL(t)
	for _, wantToken := range []string{"1", "2"} {
		r := runSimba(t, append([]string{"lock", "--backend", url, "nightly-report", "--"}, helper(t, "env")...)...)
		if r.code != 0 {
			t.Fatalf("exit code %d, stderr %q", r.code, r.stderr)
		}
		if want := "lease=nightly-report token=" + wantToken + "\n"; r.stdout != want {
			t.Errorf("the command printed %q, want %q", r.stdout, want)
		}
	}
	if _, _, held := memoryStore(t, strings.TrimPrefix(url, "memory://")).Owner("nightly-report"); held {
		t.Error("the lock is still held after the command exited")
	}
}

func TestLockExitsWithTheCommandsCode(t *testing.T) {
	for _, code := range []int{0, 1, 7, 42} {
		r := runSimba(t, append([]string{"lock", "--backend", memoryURL(t), "job", "--"}, helper(t, "exit", strconv.Itoa(code))...)...)
		if r.code != code {
			t.Errorf("command exit %d: simba exit %d (stderr %q)", code, r.code, r.stderr)
		}
	}
}

func TestLockWithoutSeparatorAndFlagsAfterName(t *testing.T) {
	cmd := helper(t, "exit", "5")
	r := runSimba(t, append([]string{"lock", "job", "--backend", memoryURL(t), "--timeout", "5s"}, cmd...)...)
	if r.code != 5 {
		t.Errorf("exit code %d, want 5; stderr %q", r.code, r.stderr)
	}
}

func TestLockTimeout(t *testing.T) {
	url := memoryURL(t)
	memoryStore(t, strings.TrimPrefix(url, "memory://")).TakeOver("busy") // held for ever by another session
	begin := time.Now()
	r := runSimba(t, append([]string{"lock", "--backend", url, "--timeout", "300ms", "busy", "--"}, helper(t, "env")...)...)
	if r.code != exitLockTimeout {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, exitLockTimeout, r.stderr)
	}
	if elapsed := time.Since(begin); elapsed < 300*time.Millisecond {
		t.Errorf("gave up after %v, before the timeout", elapsed)
	}
	if r.stdout != "" {
		t.Errorf("the command ran without the lock: %q", r.stdout)
	}
	if want := "simba lock: lock busy not acquired within 300ms\n"; withoutInProcessWarning(r.stderr) != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

// inProcessWarning is in the warning simba lock and simba leader print
// for a memory:// backend.
const inProcessWarning = "is a store in this process only"

// withoutInProcessWarning returns stderr without the line of the
// memory:// warning.
func withoutInProcessWarning(stderr string) string {
	var kept []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.Contains(line, inProcessWarning) {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// TestMemoryBackendWarnsItIsInProcess: two processes given one memory://
// URL do not share the store, so lock, leader and status say so on stderr.
func TestMemoryBackendWarnsItIsInProcess(t *testing.T) {
	for _, cmd := range []string{"lock", "leader"} {
		url := memoryURL(t)
		r := runSimba(t, append([]string{cmd, "--backend", url, "job", "--"}, helper(t, "exit", "0")...)...)
		want := "simba " + cmd + ": warning: " + url + " is a store in this process only: " +
			"a simba in another process does not see it, and can hold job at the same time\n"
		if r.code != 0 || !strings.HasPrefix(r.stderr, want) {
			t.Errorf("%s: exit code %d, stderr %q; want 0 and the warning %q", cmd, r.code, r.stderr, want)
		}
	}
	for _, args := range [][]string{{}, {"--holder", "job"}, {"--list"}, {"--format", "json"}} {
		url := memoryURL(t)
		r := runSimba(t, append([]string{"status", "--backend", url}, args...)...)
		want := "simba status: warning: " + url + " is a store in this process only: " +
			"a simba in another process does not see it, and the leases another process holds do not show here\n"
		if r.code != 0 || r.stderr != want {
			t.Errorf("status %v: exit code %d, stderr %q; want 0 and the warning %q", args, r.code, r.stderr, want)
		}
	}
}

// TestLockBackendUnavailableUntilTimeout: a backend that grants no usable
// session is an outage, not a held lock: exit code 69, not 75.
func TestLockBackendUnavailableUntilTimeout(t *testing.T) {
	url := memoryURL(t)
	memoryStore(t, strings.TrimPrefix(url, "memory://")).SetMaxLease(time.Nanosecond)
	r := runSimba(t, append([]string{"lock", "--backend", url, "--timeout", "300ms", "job", "--"}, helper(t, "env")...)...)
	if r.code != exitUnavailable {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, exitUnavailable, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("the command ran without the lock: %q", r.stdout)
	}
	// Before it: the client's warnings about the 1ns sessions it refused.
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	want := "simba lock: lock job not acquired within 300ms on " + url + ": "
	if !strings.HasPrefix(last, want) || !strings.Contains(last, "backend unavailable (no session open)") {
		t.Errorf("stderr %q, want a last line starting %q that says no session is open", r.stderr, want)
	}
}

// TestLockOnRedisHeldOrUnreachable: on a real Redis a lock held by another
// node exits 75; a Redis that cannot be reached exits 69.
func TestLockOnRedisHeldOrUnreachable(t *testing.T) {
	url := serverURL(t, "SIMBA_TEST_REDIS_URL", func(v string) string { return v })
	name := "cli-held-" + randomHex(t)
	b, err := openBackend(t.Context(), url, backendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	holder, err := simba.New(b, simba.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	lt, err := holder.Lock(name).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lt.Release(context.Background()) }()

	r := runSimba(t, append([]string{"lock", "--backend", url, "--timeout", "500ms", name, "--"}, helper(t, "env")...)...)
	if want := "simba lock: lock " + name + " not acquired within 500ms\n"; r.code != exitLockTimeout || r.stderr != want || r.stdout != "" {
		t.Errorf("held: exit code %d, stdout %q, stderr %q; want %d and %q", r.code, r.stdout, r.stderr, exitLockTimeout, want)
	}

	r = runSimba(t, append([]string{"lock", "--backend", "redis://127.0.0.1:1/0", "--timeout", "500ms", name, "--"}, helper(t, "env")...)...)
	if r.code != exitUnavailable || r.stdout != "" || !strings.Contains(r.stderr, "simba lock: backend redis://127.0.0.1:1/0 unavailable: ") {
		t.Errorf("unreachable: exit code %d, stdout %q, stderr %q; want %d", r.code, r.stdout, r.stderr, exitUnavailable)
	}
}

func TestLockLostStopsTheCommand(t *testing.T) {
	url := memoryURL(t)
	store := memoryStore(t, strings.TrimPrefix(url, "memory://"))
	inv := start(t, append([]string{"lock", "--backend", url, "--lease", "1s", "job", "--"}, helper(t, "wait")...)...)
	inv.waitOutput(t, "started token=1\n", 10*time.Second)
	store.TakeOver("job")
	r := inv.wait(t, 10*time.Second)
	if r.code != exitLockLost {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, exitLockLost, r.stderr)
	}
	if !strings.Contains(r.stdout, "got SIGTERM token=1") {
		t.Errorf("the command did not get SIGTERM; stdout %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "lost lock job (token 1): TAKEN_OVER") {
		t.Errorf("stderr %q does not say the lock was taken over", r.stderr)
	}
}

func TestLockLostKillsACommandThatIgnoresSIGTERM(t *testing.T) {
	url := memoryURL(t)
	store := memoryStore(t, strings.TrimPrefix(url, "memory://"))
	inv := start(t, append([]string{"lock", "--backend", url, "--lease", "1s", "--grace", "400ms", "job", "--"}, helper(t, "ignore-term")...)...)
	inv.waitOutput(t, "started token=1\n", 10*time.Second)
	lost := time.Now()
	id, _, _ := store.Owner("job")
	store.ExpireSession(id)
	r := inv.wait(t, 10*time.Second)
	if r.code != exitLockLost {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, exitLockLost, r.stderr)
	}
	if elapsed := time.Since(lost); elapsed < 400*time.Millisecond {
		t.Errorf("returned %v after the loss, before the grace ended", elapsed)
	}
	if !strings.Contains(r.stderr, "SESSION_EXPIRED") {
		t.Errorf("stderr %q does not give the reason", r.stderr)
	}
}

func TestLockInterruptedStopsCommandAndReleases(t *testing.T) {
	url := memoryURL(t)
	store := memoryStore(t, strings.TrimPrefix(url, "memory://"))
	inv := start(t, append([]string{"lock", "--backend", url, "job", "--"}, helper(t, "wait")...)...)
	inv.waitOutput(t, "started token=1\n", 10*time.Second)
	inv.cancel(signalError{syscall.SIGTERM})
	r := inv.wait(t, 10*time.Second)
	if r.code != 3 {
		t.Errorf("exit code %d, want the command's 3; stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "got SIGTERM") {
		t.Errorf("the command was not stopped with SIGTERM: %q", r.stdout)
	}
	if _, _, held := store.Owner("job"); held {
		t.Error("the lock is still held")
	}
}

func TestInterruptedWhileWaitingForTheLease(t *testing.T) {
	tests := []struct {
		cmd  string
		give syscall.Signal
		want int
	}{
		{"lock", syscall.SIGINT, 130},
		{"lock", syscall.SIGTERM, 143},
		{"leader", syscall.SIGINT, 130},
		{"leader", syscall.SIGTERM, 143},
	}
	for _, tt := range tests {
		t.Run(tt.cmd+" "+tt.give.String(), func(t *testing.T) {
			url := memoryURL(t)
			memoryStore(t, strings.TrimPrefix(url, "memory://")).TakeOver("busy")
			inv := start(t, append([]string{tt.cmd, "--backend", url, "busy", "--"}, helper(t, "env")...)...)
			time.Sleep(100 * time.Millisecond)
			inv.cancel(signalError{tt.give})
			if r := inv.wait(t, 10*time.Second); r.code != tt.want || r.stdout != "" {
				t.Errorf("exit code %d, stdout %q; want %d and no command run", r.code, r.stdout, tt.want)
			}
		})
	}
}

func TestLockCommandThatCannotRun(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		give     string
		wantCode int
		wantErr  string
	}{
		{"simba-no-such-command", exitNotFound, `command "simba-no-such-command" not found`},
		{filepath.Join(t.TempDir(), "missing"), exitNotFound, "not found"},
		{notExec, exitCannotRun, "is not executable"},
	}
	url := memoryURL(t)
	for _, tt := range tests {
		r := runSimba(t, "lock", "--backend", url, "job", "--", tt.give, "arg")
		if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit code %d, stderr %q; want %d and %q", tt.give, r.code, r.stderr, tt.wantCode, tt.wantErr)
		}
	}
	if tok := memoryStore(t, strings.TrimPrefix(url, "memory://")).LastToken("job"); tok != 0 {
		t.Errorf("the lock was taken (token %d) for a command that cannot run", tok)
	}
}

// TestLockCommandChangedWhileWaiting: a command found at start but
// removed while simba waited for the lock is not found (127), as a shell
// reports it, not "not executable" (126); one made not executable, or a
// script whose interpreter is gone, is 126.
func TestLockCommandChangedWhileWaiting(t *testing.T) {
	tests := []struct {
		name   string
		change func(path string) error
		want   int
	}{
		{"removed", os.Remove, exitNotFound},
		{"made not executable", func(path string) error { return os.Chmod(path, 0o644) }, exitCannotRun},
		// The start fails with ENOENT for the interpreter; the command is
		// there but cannot run, as a shell's "bad interpreter" says.
		{"interpreter gone", func(path string) error {
			return os.WriteFile(path, []byte("#!/nonexistent/simba-test-shell\n"), 0o755)
		}, exitCannotRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "command")
			if err := os.WriteFile(path, []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			url := memoryURL(t)
			store := memoryStore(t, strings.TrimPrefix(url, "memory://"))
			store.TakeOver("job")
			inv := start(t, "lock", "--backend", url, "job", "--", path)
			// The session opens after simba found the command.
			deadline := time.Now().Add(10 * time.Second)
			for len(store.Sessions()) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("simba opened no session; stderr %q", inv.stderr.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := tt.change(path); err != nil {
				t.Fatal(err)
			}
			id, _, _ := store.Owner("job")
			store.ExpireSession(id)
			r := inv.wait(t, 10*time.Second)
			if r.code != tt.want || r.stdout != "" {
				t.Errorf("exit code %d, stdout %q, want %d; stderr %q", r.code, r.stdout, tt.want, r.stderr)
			}
			if tok := store.LastToken("job"); tok != 2 {
				t.Errorf("last token %d, want 2: simba did not take the lock before it started the command", tok)
			}
		})
	}
}

func TestLockReadsBackendFromEnvironment(t *testing.T) {
	url := memoryURL(t)
	var stdout, stderr syncBuffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string {
		if k == backendEnv {
			return url
		}
		return ""
	}}
	code := a.run(t.Context(), append([]string{"lock", "job", "--"}, helper(t, "env")...))
	if code != 0 || stdout.String() != "lease=job token=1\n" {
		t.Errorf("exit code %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if memoryStore(t, strings.TrimPrefix(url, "memory://")).LastToken("job") != 1 {
		t.Error("the lock was not taken on the store named by " + backendEnv)
	}
}

// defaultGap is the safety gap of the default lease: lease*drift + margin.
var defaultGap = time.Duration(float64(simba.DefaultLeaseDuration)*simba.DefaultDrift) + simba.DefaultMargin

// TestHelpStatesTheSafetyGap: both commands say that the command may run
// for up to --grace after the lease was lost, and what the default is.
func TestHelpStatesTheSafetyGap(t *testing.T) {
	for _, cmd := range []string{"lock", "leader"} {
		r := runSimba(t, cmd, "--help")
		for _, want := range []string{"may run\nfor up to --grace", "safety gap", defaultGap.String(), "--lease × drift + margin", "warns"} {
			if !strings.Contains(strings.ReplaceAll(r.stdout, "\n", " "), strings.ReplaceAll(want, "\n", " ")) {
				t.Errorf("%s --help does not say %q:\n%s", cmd, want, r.stdout)
			}
		}
	}
}

// TestGraceLongerThanTheSafetyGapWarns: a --grace above lease*drift +
// margin gets a warning on stderr, the default and shorter values none.
func TestGraceLongerThanTheSafetyGapWarns(t *testing.T) {
	tests := []struct {
		flags []string
		want  string // "" for no warning
	}{
		{nil, ""},
		{[]string{"--grace", "150ms"}, ""},
		{[]string{"--grace", "0s"}, ""},
		{[]string{"--grace", "5s"}, "simba lock: warning: --grace 5s exceeds the safety gap of 200ms (--lease 15s × drift 0.01 + margin 50ms)"},
		{[]string{"--lease", "1s", "--grace", "100ms"}, "--grace 100ms exceeds the safety gap of 60ms"},
	}
	for _, tt := range tests {
		name := strings.Join(tt.flags, " ")
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			args := append(append([]string{"lock", "--backend", memoryURL(t)}, tt.flags...), "job", "--")
			r := runSimba(t, append(args, helper(t, "exit", "0")...)...)
			if r.code != 0 {
				t.Fatalf("exit code %d, stderr %q", r.code, r.stderr)
			}
			switch stderr := withoutInProcessWarning(r.stderr); {
			case tt.want == "" && stderr != "":
				t.Errorf("stderr %q, want nothing", r.stderr)
			case tt.want != "" && !strings.Contains(stderr, tt.want):
				t.Errorf("stderr %q, want a warning %q", r.stderr, tt.want)
			}
		})
	}
}

// TestDefaultGraceFitsTheSafetyGap: without --grace, a command that
// ignores SIGTERM is killed within the safety gap of its lease (60ms for
// 1s), not seconds after the lock was lost.
func TestDefaultGraceFitsTheSafetyGap(t *testing.T) {
	url := memoryURL(t)
	store := memoryStore(t, strings.TrimPrefix(url, "memory://"))
	inv := start(t, append([]string{"lock", "--backend", url, "--lease", "1s", "job", "--"}, helper(t, "ignore-term")...)...)
	inv.waitOutput(t, "started token=1\n", 10*time.Second)
	lost := time.Now()
	id, _, _ := store.Owner("job")
	store.ExpireSession(id)
	r := inv.wait(t, 10*time.Second)
	if r.code != exitLockLost {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, exitLockLost, r.stderr)
	}
	// The gap is 60ms; the bound leaves room for a loaded machine.
	if elapsed := time.Since(lost); elapsed > 2*time.Second {
		t.Errorf("the command was killed %v after the loss, want about 60ms", elapsed)
	}
}
