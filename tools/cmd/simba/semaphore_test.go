package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLockPermitsPassesTheSlotLease(t *testing.T) {
	url := memoryURL(t)
	r := runSimba(t, append([]string{"lock", "--backend", url, "--permits", "3", "pool", "--"}, helper(t, "env")...)...)
	if r.code != 0 {
		t.Fatalf("exit code %d, stderr %q", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "lease=pool:") || !strings.HasSuffix(r.stdout, " token=1\n") {
		t.Errorf("the command printed %q, want lease=pool:<slot> token=1", r.stdout)
	}
}

func TestLockPermitsUsageErrors(t *testing.T) {
	long := strings.Repeat("n", 126) // "n...:9" fits the 128 characters of a name, "n...:99" does not
	for _, tc := range []struct{ name, permits, want string }{
		{"pool", "0", "--permits 0: must be 1 to 1024"},
		{"pool", "-1", "--permits -1: must be 1 to 1024"},
		{"pool", "1025", "--permits 1025: must be 1 to 1024"},
		{"pool", "abc", `--permits "abc": not a whole number`},
		{"pool", "", "--permits is empty: give a number of permits from 1 to 1024"},
		{"pool", "1.5", `--permits "1.5": not a whole number`},
		{"pool", "99999999999999999999", "not a whole number"},
		{long, "100", "--permits 100: "},
	} {
		r := runSimba(t, append([]string{"lock", "--backend", memoryURL(t), "--permits", tc.permits, tc.name, "--"}, helper(t, "env")...)...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("--permits %s %s: exit code %d, stdout %q, stderr %q; want %d and %q", tc.permits, tc.name[:4], r.code, r.stdout, r.stderr, exitUsage, tc.want)
		}
	}
	r := runSimba(t, append([]string{"lock", "--backend", memoryURL(t), "--permits", "10", long, "--"}, helper(t, "exit", "0")...)...)
	if r.code != 0 {
		t.Errorf("a long name whose last slot fits: exit code %d, stderr %q", r.code, r.stderr)
	}
}

// permitsAtMostN runs n holders of --permits n on url, then an n+1st that
// must time out, and after one holder ends, an n+1st that must run.
func permitsAtMostN(t *testing.T, url, name string, n int) {
	t.Helper()
	var holders []*invocation
	for range n {
		inv := start(t, append([]string{"lock", "--backend", url, "--permits", strconv.Itoa(n), name, "--"}, helper(t, "wait")...)...)
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(inv.stdout.String(), "started token=") {
			select {
			case code := <-inv.done:
				inv.done <- code // for the cleanup
				t.Fatalf("holder %d exited with %d before its command started; stderr %q", len(holders), code, inv.stderr.String())
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("holder %d: no command started after 20s; stderr %q", len(holders), inv.stderr.String())
			}
		}
		holders = append(holders, inv)
	}
	r := runSimba(t, append([]string{"lock", "--backend", url, "--permits", strconv.Itoa(n), "--timeout", "500ms", name, "--"}, helper(t, "env")...)...)
	want := "semaphore " + name + " (" + strconv.Itoa(n) + " permits) not acquired within 500ms"
	if r.code != exitLockTimeout || r.stdout != "" || !strings.Contains(r.stderr, want) {
		t.Errorf("the n+1st holder: exit code %d, stdout %q, stderr %q; want %d and %q", r.code, r.stdout, r.stderr, exitLockTimeout, want)
	}
	holders[0].cancel(nil)
	holders[0].wait(t, 20*time.Second)
	r = runSimba(t, append([]string{"lock", "--backend", url, "--permits", strconv.Itoa(n), "--timeout", "10s", name, "--"}, helper(t, "env")...)...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "lease="+name+":") {
		t.Errorf("after a release: exit code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runSimba(t, append([]string{"lock", "--backend", url, "--permits", strconv.Itoa(n + 1), "--timeout", "1s", name, "--"}, helper(t, "env")...)...)
	if r.code != exitFailure || !strings.Contains(r.stderr, "permits") {
		t.Errorf("another number of permits: exit code %d, stdout %q, stderr %q; want %d", r.code, r.stdout, r.stderr, exitFailure)
	}
}

func TestLockPermitsAtMostNOnMemory(t *testing.T) {
	permitsAtMostN(t, memoryURL(t), "pool", 2)
}

// TestLockPermitsAtMostNOnRealBackends runs the holders as separate
// clients of each test server, as separate processes would be.
func TestLockPermitsAtMostNOnRealBackends(t *testing.T) {
	for _, be := range realBackends {
		t.Run(be.name, func(t *testing.T) {
			url := serverURL(t, be.variable, be.toURL)
			if r := runSimba(t, "status", "--backend", url, "--migrate", "--format", "json"); r.code != exitOK {
				t.Fatalf("migrate: exit code %d, stderr %q", r.code, r.stderr)
			}
			permitsAtMostN(t, url, "cli-permits-"+randomHex(t), 2)
		})
	}
}
