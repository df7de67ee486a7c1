package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv marks a run of the test binary as a child command of simba
// lock or simba leader; the mode is its first argument. It must not start
// with SIMBA_: simba does not pass those on to the command.
const helperEnv = "CLITEST_SIMBA_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helperMain(os.Args[1:]))
	}
	// Inherited by the children only: this process is past the check.
	os.Setenv(helperEnv, "1")
	// A child built with -race would otherwise sleep a second as it exits.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeSimbaBinary()
		os.Exit(code)
	}))
}

// helperMain is the child command of the tests:
//
//	env          print "lease=NAME token=N" and exit 0
//	environ      print the variables SIMBA_* and CLITEST_*, sorted
//	exit N       exit with code N
//	wait         print "started token=N", exit 3 on SIGTERM
//	ignore-term  print "started token=N", ignore SIGTERM until killed
func helperMain(args []string) int {
	if len(args) == 0 {
		return 100
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	switch args[0] {
	case "env":
		fmt.Printf("lease=%s token=%s\n", os.Getenv(envLease), os.Getenv(envToken))
		return 0
	case "environ":
		var vars []string
		for _, kv := range os.Environ() {
			upper := strings.ToUpper(kv)
			if (strings.HasPrefix(upper, "SIMBA_") || strings.HasPrefix(kv, "CLITEST_")) && !strings.HasPrefix(kv, helperEnv+"=") {
				vars = append(vars, kv)
			}
		}
		slices.Sort(vars)
		fmt.Print(strings.Join(vars, "\n") + "\n")
		return 0
	case "exit":
		code, _ := strconv.Atoi(args[1])
		return code
	case "wait":
		fmt.Printf("started token=%s\n", os.Getenv(envToken))
		<-term
		fmt.Printf("got SIGTERM token=%s\n", os.Getenv(envToken))
		return 3
	case "ignore-term":
		fmt.Printf("started token=%s\n", os.Getenv(envToken))
		for {
			<-term
		}
	}
	return 101
}

// helper returns the command line that runs helperMain in mode.
func helper(t *testing.T, mode ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe}, mode...)
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of simba and
// its child's output copier.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// result is the outcome of one simba invocation.
type result struct {
	code           int
	stdout, stderr string
}

// invocation is a simba run in progress.
type invocation struct {
	stdout, stderr syncBuffer
	cancel         context.CancelCauseFunc
	done           chan int
}

// start runs simba with args in the background, with SIMBA_BACKEND unset.
func start(t *testing.T, args ...string) *invocation {
	t.Helper()
	ctx, cancel := context.WithCancelCause(t.Context())
	inv := &invocation{cancel: cancel, done: make(chan int, 1)}
	a := &app{stdin: strings.NewReader(""), stdout: &inv.stdout, stderr: &inv.stderr, getenv: func(string) string { return "" }}
	go func() { inv.done <- a.run(ctx, args) }()
	t.Cleanup(func() {
		cancel(nil)
		<-inv.done
	})
	return inv
}

// wait returns the result once simba has exited, failing the test after
// limit.
func (inv *invocation) wait(t *testing.T, limit time.Duration) result {
	t.Helper()
	select {
	case code := <-inv.done:
		inv.done <- code // for the cleanup
		return result{code, inv.stdout.String(), inv.stderr.String()}
	case <-time.After(limit):
		t.Fatalf("simba still running after %v; stdout:\n%s\nstderr:\n%s", limit, inv.stdout.String(), inv.stderr.String())
		return result{}
	}
}

// waitOutput waits until the standard output contains want.
func (inv *invocation) waitOutput(t *testing.T, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(inv.stdout.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after %v; stdout:\n%s\nstderr:\n%s", want, limit, inv.stdout.String(), inv.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runSimba runs simba with args to completion. The output of every
// simba status --format json must fit docs/snapshot.schema.json, or
// docs/holders.schema.json with --holder or --list.
func runSimba(t *testing.T, args ...string) result {
	t.Helper()
	r := start(t, args...).wait(t, 30*time.Second)
	if len(args) > 0 && args[0] == "status" && (slices.Contains(args, "json") || slices.Contains(args, "--format=json")) && r.stdout != "" {
		if asksOthers(args) {
			validHolders(t, r.stdout)
		} else {
			validSnapshot(t, r.stdout)
		}
	}
	return r
}
