package main

import (
	"fmt"
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
	if _, _, held := memoryStore(strings.TrimPrefix(url, "memory://")).Owner("nightly-report"); held {
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
	memoryStore(strings.TrimPrefix(url, "memory://")).TakeOver("busy") // held for ever by another session
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
	if want := "simba lock: lock busy not acquired within 300ms\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

func TestLockLostStopsTheCommand(t *testing.T) {
	url := memoryURL(t)
	store := memoryStore(strings.TrimPrefix(url, "memory://"))
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
	store := memoryStore(strings.TrimPrefix(url, "memory://"))
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
	store := memoryStore(strings.TrimPrefix(url, "memory://"))
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
			memoryStore(strings.TrimPrefix(url, "memory://")).TakeOver("busy")
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
	if tok := memoryStore(strings.TrimPrefix(url, "memory://")).LastToken("job"); tok != 0 {
		t.Errorf("the lock was taken (token %d) for a command that cannot run", tok)
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
	if memoryStore(strings.TrimPrefix(url, "memory://")).LastToken("job") != 1 {
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
			switch {
			case tt.want == "" && r.stderr != "":
				t.Errorf("stderr %q, want nothing", r.stderr)
			case tt.want != "" && !strings.Contains(r.stderr, tt.want):
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
	store := memoryStore(strings.TrimPrefix(url, "memory://"))
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
