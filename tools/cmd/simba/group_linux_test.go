package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run the simba binary, with commands that start a background
// process, and check that no process of the command is left when simba has
// exited.

// background is the command of the tests: a shell that starts a
// background sleep, writes "PID TOKEN" to the file $1 and waits.
var background = []string{"sh", "-c", `sleep 1000 & echo "$! $SIMBA_TOKEN" > "$1.tmp" && mv "$1.tmp" "$1"; wait`, "sh"}

// simbaProc is a simba process of a test.
type simbaProc struct {
	cmd            *exec.Cmd
	stdout, stderr string // files
	done           chan struct{}
}

// startSimbaProc runs the simba binary with args, in a process group of
// its own (signals for it never reach the test), its output in files. A
// cleanup kills it if it still runs.
func startSimbaProc(t *testing.T, args ...string) *simbaProc {
	t.Helper()
	dir := t.TempDir()
	p := &simbaProc{stdout: filepath.Join(dir, "stdout"), stderr: filepath.Join(dir, "stderr"), done: make(chan struct{})}
	out, err := os.Create(p.stdout)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	p.cmd = exec.Command(simbaBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = out, errf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// output returns what simba printed so far.
func (p *simbaProc) output() string {
	out, _ := os.ReadFile(p.stdout)
	errs, _ := os.ReadFile(p.stderr)
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", out, errs)
}

// wait returns simba's exit code once it exited (-1 for a signal),
// failing the test after limit.
func (p *simbaProc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("simba still runs after %v\n%s", limit, p.output())
		return 0
	}
}

// signal sends sig to simba.
func (p *simbaProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to simba: %v", sig, err)
	}
}

// started is what the command of a test wrote: the pid of its background
// process, the process group of that process and the term's token.
type started struct {
	pid, pgid int
	token     string
}

// waitStarted waits until the command wrote file, and registers a cleanup
// that kills what is left of the command.
func waitStarted(t *testing.T, p *simbaProc, file string) started {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		data, err := os.ReadFile(file)
		if err == nil {
			var s started
			if _, err := fmt.Sscan(string(data), &s.pid, &s.token); err != nil {
				t.Fatalf("%s: %q: %v", file, data, err)
			}
			if s.pgid, err = syscall.Getpgid(s.pid); err != nil {
				t.Fatalf("process group of %d: %v", s.pid, err)
			}
			if s.pgid == syscall.Getpgrp() {
				t.Fatalf("the command runs in the test's process group %d", s.pgid)
			}
			t.Cleanup(func() {
				if running(s.pid) {
					_ = syscall.Kill(s.pid, syscall.SIGKILL)
				}
				if len(groupMembers(s.pgid)) > 0 {
					_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
				}
			})
			return s
		}
		select {
		case <-p.done:
			t.Fatalf("simba exited before the command started\n%s", p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start within 15s\n%s", p.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkGone fails the test when the background process or another process
// of its group runs.
func checkGone(t *testing.T, s started, when string) {
	t.Helper()
	if running(s.pid) {
		t.Errorf("%s: the command's background process %d still runs", when, s.pid)
	}
	if m := groupMembers(s.pgid); len(m) > 0 {
		t.Errorf("%s: processes %v of the command's group %d still run", when, m, s.pgid)
	}
}

// procStat returns the state and the process group of pid from /proc.
func procStat(pid string) (state byte, pgid int, ok bool) {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 {
		return 0, 0, false
	}
	pgid, err = strconv.Atoi(f[2])
	return f[0][0], pgid, err == nil
}

// running reports whether pid exists and is not a zombie (init here may
// take seconds to collect an orphan).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	state, _, ok := procStat(strconv.Itoa(pid))
	return ok && state != 'Z' && state != 'X'
}

// groupMembers returns the processes of group pgid that are not zombies.
func groupMembers(pgid int) []int {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, g, ok := procStat(e.Name()); ok && g == pgid && state != 'Z' && state != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestLockLostStopsTheWholeProcessGroup: the holder is paused past its
// lease, another node takes the lock, and when the holder resumes it must
// stop its command's background process too, not only the shell.
func TestLockLostStopsTheWholeProcessGroup(t *testing.T) {
	url := serverURL(t, "SIMBA_TEST_REDIS_URL", func(v string) string { return v })
	name := "cli-group-lost-" + randomHex(t)
	file := filepath.Join(t.TempDir(), "started")
	holder := startSimbaProc(t, append([]string{"lock", "--backend", url, "--lease", "1s", name, "--"}, append(background, file)...)...)
	s := waitStarted(t, holder, file)

	holder.signal(t, syscall.SIGSTOP)
	other := startSimbaProc(t, "lock", "--backend", url, "--lease", "1s", "--timeout", "15s", name, "--", "sh", "-c", `echo "token=$SIMBA_TOKEN"`)
	if code := other.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("the other node: exit code %d\n%s", code, other.output())
	}
	out, _ := os.ReadFile(other.stdout)
	m := regexp.MustCompile(`token=(\d+)`).FindSubmatch(out)
	var token, held uint64
	if m != nil {
		token, _ = strconv.ParseUint(string(m[1]), 10, 64)
		held, _ = strconv.ParseUint(s.token, 10, 64)
	}
	if token <= held {
		t.Fatalf("the other node ran with %q, want a token above the holder's %s", out, s.token)
	}

	holder.signal(t, syscall.SIGCONT)
	if code := holder.wait(t, 15*time.Second); code != exitLockLost {
		t.Errorf("the holder: exit code %d, want %d\n%s", code, exitLockLost, holder.output())
	}
	checkGone(t, s, "after the holder exited")
}

// TestSignalStopsTheWholeProcessGroup: every signal that stops simba stops
// the command's background process before simba exits.
func TestSignalStopsTheWholeProcessGroup(t *testing.T) {
	tests := []struct {
		cmd     string
		backend string // memory, or a variable
		sig     syscall.Signal
	}{
		{"lock", "memory", syscall.SIGTERM},
		{"lock", "memory", syscall.SIGINT},
		{"lock", "memory", syscall.SIGHUP},
		{"lock", "memory", syscall.SIGQUIT},
		{"leader", "memory", syscall.SIGTERM},
		{"lock", "SIMBA_TEST_REDIS_URL", syscall.SIGTERM},
	}
	for _, tt := range tests {
		t.Run(tt.cmd+" "+tt.backend+" "+tt.sig.String(), func(t *testing.T) {
			url := "memory://"
			if tt.backend != "memory" {
				url = serverURL(t, tt.backend, func(v string) string { return v })
			}
			file := filepath.Join(t.TempDir(), "started")
			p := startSimbaProc(t, append([]string{tt.cmd, "--backend", url, "cli-group-signal-" + randomHex(t), "--"}, append(background, file)...)...)
			s := waitStarted(t, p, file)
			p.signal(t, tt.sig)
			if code := p.wait(t, 10*time.Second); code != exitSignalBase+int(syscall.SIGTERM) {
				t.Errorf("exit code %d, want %d (the shell's, ended by SIGTERM)\n%s", code, exitSignalBase+int(syscall.SIGTERM), p.output())
			}
			checkGone(t, s, "when simba exited")
		})
	}
}

// TestCommandExitStopsWhatItLeftRunning: a command that exits and leaves a
// background process behind must not leave it running without the lease.
func TestCommandExitStopsWhatItLeftRunning(t *testing.T) {
	for _, cmd := range []string{"lock", "leader"} {
		t.Run(cmd, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "started")
			p := startSimbaProc(t, cmd, "--backend", "memory://", "cli-group-exit-"+randomHex(t), "--", "sh", "-c",
				`sleep 1000 & echo "$! $SIMBA_TOKEN" > "$1.tmp" && mv "$1.tmp" "$1"; exit 5`, "sh", file)
			s := waitStarted(t, p, file)
			if code := p.wait(t, 10*time.Second); code != 5 {
				t.Errorf("exit code %d, want the command's 5\n%s", code, p.output())
			}
			checkGone(t, s, "when simba exited")
		})
	}
}

// TestSimbaKilledTakesTheCommandAlong: when simba dies of SIGKILL, the
// command (its direct child) must not run on alone.
func TestSimbaKilledTakesTheCommandAlong(t *testing.T) {
	file := filepath.Join(t.TempDir(), "started")
	p := startSimbaProc(t, "lock", "--backend", "memory://", "cli-group-killed-"+randomHex(t), "--", "sh", "-c",
		`echo "$$ $SIMBA_TOKEN" > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 1000`, "sh", file)
	s := waitStarted(t, p, file)
	p.signal(t, syscall.SIGKILL)
	p.wait(t, 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for running(s.pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the command %d still runs 5s after simba was killed", s.pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
