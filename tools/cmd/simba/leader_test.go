package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLeaderRestartsTheCommandForEachTerm(t *testing.T) {
	url := memoryURL(t)
	store := memoryStore(t, strings.TrimPrefix(url, "memory://"))
	inv := start(t, append([]string{"leader", "--backend", url, "--lease", "1s", "scheduler", "--"}, helper(t, "wait")...)...)
	inv.waitOutput(t, "started token=1\n", 10*time.Second)

	// The backend ends the session: the term ends, the command is stopped,
	// and the node, back with a new session, wins the next term.
	id, _, _ := store.Owner("scheduler")
	store.ExpireSession(id)
	inv.waitOutput(t, "got SIGTERM token=1\n", 10*time.Second)
	inv.waitOutput(t, "started token=2\n", 10*time.Second)

	inv.cancel(signalError{syscall.SIGTERM})
	r := inv.wait(t, 10*time.Second)
	if r.code != 3 {
		t.Errorf("exit code %d, want the command's 3; stderr %q", r.code, r.stderr)
	}
	if want := "started token=1\ngot SIGTERM token=1\nstarted token=2\ngot SIGTERM token=2\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	for _, want := range []string{"leading scheduler with token 1", "ended: SESSION_EXPIRED", "leading scheduler with token 2"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if _, _, held := store.Owner("scheduler"); held {
		t.Error("the lease is still held after simba exited")
	}
}

func TestLeaderCommandExitGivesTheLeaseUp(t *testing.T) {
	url := memoryURL(t)
	r := runSimba(t, append([]string{"leader", "--backend", url, "scheduler", "--"}, helper(t, "exit", "4")...)...)
	if r.code != 4 {
		t.Errorf("exit code %d, want the command's 4; stderr %q", r.code, r.stderr)
	}
	store := memoryStore(t, strings.TrimPrefix(url, "memory://"))
	if _, _, held := store.Owner("scheduler"); held {
		t.Error("the lease is still held after the command exited")
	}
	if store.LastToken("scheduler") != 1 {
		t.Errorf("the command ran for %d terms, want 1", store.LastToken("scheduler"))
	}
}

func TestLeaderPassesTokenAndLease(t *testing.T) {
	r := runSimba(t, append([]string{"leader", "--backend", memoryURL(t), "scheduler", "--"}, helper(t, "env")...)...)
	if r.code != 0 || r.stdout != "lease=scheduler token=1\n" {
		t.Errorf("exit code %d, stdout %q; stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestLeaderCommandNotFound(t *testing.T) {
	r := runSimba(t, "leader", "--backend", memoryURL(t), "scheduler", "--", "simba-no-such-command")
	if r.code != exitNotFound || !strings.Contains(r.stderr, "not found") {
		t.Errorf("exit code %d, stderr %q; want %d", r.code, r.stderr, exitNotFound)
	}
}

// TestLeaderCommandGoneAtALaterTerm: a command found at start but removed
// before a later term is not found (127), as a shell reports it, not
// "not executable" (126).
func TestLeaderCommandGoneAtALaterTerm(t *testing.T) {
	link := filepath.Join(t.TempDir(), "command")
	if err := os.Symlink(helper(t)[0], link); err != nil {
		t.Fatal(err)
	}
	url := memoryURL(t)
	store := memoryStore(t, strings.TrimPrefix(url, "memory://"))
	inv := start(t, "leader", "--backend", url, "--lease", "1s", "scheduler", "--", link, "wait")
	inv.waitOutput(t, "started token=1\n", 10*time.Second)
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	id, _, _ := store.Owner("scheduler")
	store.ExpireSession(id)
	r := inv.wait(t, 10*time.Second)
	if r.code != exitNotFound {
		t.Errorf("exit code %d, want %d; stderr %q", r.code, exitNotFound, r.stderr)
	}
}
