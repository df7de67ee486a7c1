package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

func TestStatusJSONShowsTheSession(t *testing.T) {
	r := runSimba(t, "status", "--backend", memoryURL(t), "--lease", "3s", "--format", "json")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit code %d, stderr %q", r.code, r.stderr)
	}
	var got struct {
		Backend string
		Session struct {
			ID              string
			Status          string
			RemainingMs     int64
			RenewIntervalMs int64
		}
		Leases []any
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if got.Backend != memoryURL(t) || got.Session.Status != "LIVE" || len(got.Session.ID) != 32 {
		t.Errorf("unexpected session: %+v", got)
	}
	if got.Session.RemainingMs <= 0 || got.Session.RemainingMs > 3000 || got.Session.RenewIntervalMs != 1000 {
		t.Errorf("timing %d ms left, renew %d ms; want (0, 3000] and 1000", got.Session.RemainingMs, got.Session.RenewIntervalMs)
	}
	if got.Leases == nil || len(got.Leases) != 0 {
		t.Errorf("leases %v, want an empty list", got.Leases)
	}
}

func TestStatusTable(t *testing.T) {
	r := runSimba(t, "status", "--backend", memoryURL(t))
	if r.code != exitOK {
		t.Fatalf("exit code %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"backend:    " + memoryURL(t) + "\n", "status:     LIVE\n", "renew:      every 5s\n", "leases:     none on this client\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
}

func TestStatusTableListsLeases(t *testing.T) {
	var b bytes.Buffer
	snap := simba.Snapshot{
		Session: simba.SessionSnapshot{ID: "abc", Status: simba.StatusLive, Remaining: 14 * time.Second, Renew: 5 * time.Second},
		Leases: []simba.LeaseSnapshot{
			{Name: "reports", Kind: "lock", State: simba.StateLeader, Token: 12, Remaining: 14 * time.Second},
			{Name: "scheduler", Kind: "election", State: simba.StateCandidate},
		},
	}
	if err := writeStatusTable(&b, "redis://h", snap); err != nil {
		t.Fatal(err)
	}
	want := `backend:    redis://h
session:    abc
status:     LIVE
remaining:  14s
renew:      every 5s

NAME       KIND      STATE      TOKEN  REMAINING
reports    lock      LEADER     12     14s
scheduler  election  CANDIDATE  -      0s
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestStatusUnavailableBackends(t *testing.T) {
	for _, url := range []string{
		"redis://127.0.0.1:1/0",
		"postgres://postgres@127.0.0.1:1/postgres?sslmode=disable",
		"mysql://root@127.0.0.1:1/simba",
		"zk://127.0.0.1:1",
	} {
		r := runSimba(t, "status", "--backend", url, "--connect-timeout", "5s")
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "unavailable") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit code %d, stderr %q; want %d and one line", url, r.code, r.stderr, exitUnavailable)
		}
	}
}

func TestStatusTimesOutWithoutASession(t *testing.T) {
	url := memoryURL(t)
	// A store that grants nothing usable: every session is capped to 1ns.
	memoryStore(t, strings.TrimPrefix(url, "memory://")).SetMaxLease(time.Nanosecond)
	r := runSimba(t, "status", "--backend", url, "--timeout", "300ms", "--format", "json")
	if r.code != exitUnavailable {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, exitUnavailable, r.stderr)
	}
	if !strings.Contains(r.stdout, `"status": "OPENING"`) {
		t.Errorf("the snapshot was not printed: %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "no session opened") {
		t.Errorf("stderr %q", r.stderr)
	}
}
