package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
)

func TestStatusJSONShowsTheSession(t *testing.T) {
	r := runSimba(t, "status", "--backend", memoryURL(t), "--lease", "3s", "--format", "json")
	if r.code != exitOK || withoutInProcessWarning(r.stderr) != "" {
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
		Session: simba.SessionSnapshot{ID: "abc", Identity: "db-7:4121", Status: simba.StatusLive, Remaining: 14 * time.Second, Renew: 5 * time.Second},
		Leases: []simba.LeaseSnapshot{
			{Name: "reports", Kind: "lock", State: simba.StateHolding, Token: 12, Remaining: 14 * time.Second},
			{Name: "scheduler", Kind: "election", State: simba.StateContending},
		},
	}
	if err := writeStatusTable(&b, "redis://h", snap); err != nil {
		t.Fatal(err)
	}
	want := `backend:    redis://h
session:    abc
identity:   db-7:4121
status:     LIVE
remaining:  14s
renew:      every 5s

NAME       KIND      STATE       TOKEN  REMAINING
reports    lock      HOLDING     12     14s
scheduler  election  CONTENDING  -      0s
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

func TestStatusTableListsHolders(t *testing.T) {
	var b bytes.Buffer
	since := time.Date(2026, 3, 2, 11, 15, 4, 123456789, time.FixedZone("CET", 3600))
	holders := []holderRead{
		{name: "reports", held: true, h: simba.Holder{Session: "e3ea31e4", Identity: "worker-7 (eu)", Token: 12, Since: since}},
		{name: "billing"},
		{name: "audit", held: true, h: simba.Holder{Session: "0100", Token: 3}},
		{name: "x", err: errors.New("timeout")},
	}
	if err := writeOthersTable(&b, "redis://h", holders, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	want := `backend:  redis://h

LEASE    HELD BY        SESSION   TOKEN  SINCE
reports  worker-7 (eu)  e3ea31e4  12     2026-03-02T10:15:04.123Z
billing  free           -         -      -
audit    (unknown)      0100      3      -
x        (not read)     -         -      -
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// holdLease takes the lock name on the in-process store of url, with a
// client whose session carries identity, until the test ends.
func holdLease(t *testing.T, url, identity, name string) *simba.LockTerm {
	t.Helper()
	conn, err := openBackend(t.Context(), url, backendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := simba.New(conn, simba.WithIdentity(identity))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close(context.Background())
		_ = conn.Close()
	})
	lt, err := c.Lock(name).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return lt
}

// holdersJSON is the "holders" list of simba status --format json.
type holdersJSON struct {
	Session struct{ Identity string }
	Holders []struct {
		Name   string
		Free   bool
		Holder *struct {
			Session  string
			Identity string
			Token    uint64
			Since    time.Time
		}
		Error string
	}
}

func TestStatusShowsHolders(t *testing.T) {
	url := memoryURL(t)
	before := time.Now()
	lt := holdLease(t, url, "worker-7", "reports")
	after := time.Now()

	r := runSimba(t, "status", "--backend", url, "--holder", "reports,billing", "--holder", "reports", "--format", "json")
	if r.code != exitOK || withoutInProcessWarning(r.stderr) != "" {
		t.Fatalf("exit code %d, stderr %q", r.code, r.stderr)
	}
	var got holdersJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(got.Holders) != 2 || got.Holders[0].Name != "reports" || got.Holders[1].Name != "billing" {
		t.Fatalf("holders %+v, want reports then billing, once each", got.Holders)
	}
	h := got.Holders[0].Holder
	if got.Holders[0].Free || h == nil || h.Identity != "worker-7" || h.Session != string(lt.Session()) || h.Token != lt.Token() {
		t.Errorf("reports: %+v, want held by worker-7, session %s, token %d", got.Holders[0], lt.Session(), lt.Token())
	} else if h.Since.Before(before) || h.Since.After(after) || h.Since.Location() != time.UTC {
		t.Errorf("reports held since %v, want a UTC time in [%v, %v]", h.Since, before, after)
	}
	if !got.Holders[1].Free || got.Holders[1].Holder != nil {
		t.Errorf("billing: %+v, want free", got.Holders[1])
	}
	if !strings.Contains(r.stdout, `"holder": null`) {
		t.Errorf("a free lease has no \"holder\": null:\n%s", r.stdout)
	}

	r = runSimba(t, "status", "--backend", url, "--holder", "billing", "--holder", "reports")
	if r.code != exitOK || withoutInProcessWarning(r.stderr) != "" {
		t.Fatalf("table: exit code %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{
		"\nLEASE    HELD BY   SESSION  ",
		"\nbilling  free      -        ",
		fmt.Sprintf("\nreports  worker-7  %s  %d      20", lt.Session(), lt.Token()),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}

	// Released: nobody holds it.
	if err := lt.Close(); err != nil {
		t.Fatal(err)
	}
	r = runSimba(t, "status", "--backend", url, "--holder", "reports", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &got); r.code != exitOK || err != nil || len(got.Holders) != 1 || !got.Holders[0].Free {
		t.Errorf("after the release: exit code %d, %v, output %s", r.code, err, r.stdout)
	}
}

func TestStatusWithoutHoldersHasNoHolderList(t *testing.T) {
	r := runSimba(t, "status", "--backend", memoryURL(t), "--format", "json")
	if r.code != exitOK || strings.Contains(r.stdout, "holders") {
		t.Errorf("exit code %d, output %s; want no \"holders\"", r.code, r.stdout)
	}
	r = runSimba(t, "status", "--backend", memoryURL(t))
	if r.code != exitOK || strings.Contains(r.stdout, "LEASE") {
		t.Errorf("exit code %d, output %s; want no holder table", r.code, r.stdout)
	}
}

// holderlessScheme opens the in-process store of memory://NAME through a
// backend that cannot tell who holds a lease.
const holderlessScheme = "holderless"

func init() {
	simba.RegisterBackend(holderlessScheme, func(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
		b, err := openBackend(ctx, "memory://"+strings.TrimPrefix(rawURL, holderlessScheme+"://"), backendOptions{})
		if err != nil {
			return nil, err
		}
		return struct{ simba.OpenedBackend }{b}, nil
	})
}

func TestStatusHolderOnABackendWithoutIt(t *testing.T) {
	url := holderlessScheme + "://" + strings.TrimPrefix(memoryURL(t), "memory://")
	r := runSimba(t, "status", "--backend", url)
	if r.code != exitOK {
		t.Fatalf("without --holder: exit code %d, stderr %q", r.code, r.stderr)
	}
	r = runSimba(t, "status", "--backend", url, "--holder", "reports", "--format", "json")
	if r.code != exitUsage || r.stdout != "" {
		t.Errorf("exit code %d, stdout %q; want %d and nothing", r.code, r.stdout, exitUsage)
	}
	want := "simba status: --holder: the backend " + url + " cannot tell who holds a lease (simba: not supported by the backend)\n"
	if r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

// failingHolderScheme opens the in-process store of memory://NAME
// through a backend whose holder reads fail.
const failingHolderScheme = "holderfails"

type failingHolder struct{ simba.OpenedBackend }

func (failingHolder) Holder(context.Context, string) (simba.Holder, bool, error) {
	return simba.Holder{}, false, errors.New("connection reset")
}

func init() {
	simba.RegisterBackend(failingHolderScheme, func(ctx context.Context, rawURL string) (simba.OpenedBackend, error) {
		b, err := openBackend(ctx, "memory://"+strings.TrimPrefix(rawURL, failingHolderScheme+"://"), backendOptions{})
		if err != nil {
			return nil, err
		}
		return failingHolder{b}, nil
	})
}

func TestStatusHolderReadFails(t *testing.T) {
	url := failingHolderScheme + "://" + strings.TrimPrefix(memoryURL(t), "memory://")
	r := runSimba(t, "status", "--backend", url, "--holder", "reports", "--format", "json")
	if r.code != exitUnavailable {
		t.Fatalf("exit code %d, want %d; stderr %q", r.code, exitUnavailable, r.stderr)
	}
	want := "simba status: holder of reports not read on " + url + ": simba: holder of reports: connection reset\n"
	if r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	var got holdersJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("the status was not printed: %v\n%s", err, r.stdout)
	}
	if len(got.Holders) != 1 || got.Holders[0].Free || got.Holders[0].Holder != nil || !strings.Contains(got.Holders[0].Error, "connection reset") {
		t.Errorf("holders %+v, want reports with an error", got.Holders)
	}
}

// TestIdentityFlag: --identity is what the session carries, shown by
// status and seen by other nodes as the holder.
func TestIdentityFlag(t *testing.T) {
	url := memoryURL(t)
	inv := start(t, append([]string{"lock", "--backend", url, "--identity", "batch-3 (eu-west)", "nightly", "--"}, helper(t, "wait")...)...)
	inv.waitOutput(t, "started token=1\n", 10*time.Second)
	r := runSimba(t, "status", "--backend", url, "--identity", "ops", "--holder", "nightly", "--format", "json")
	if r.code != exitOK {
		t.Fatalf("status: exit code %d, stderr %q", r.code, r.stderr)
	}
	var got holdersJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Session.Identity != "" {
		t.Errorf("status --holder shows its own session (identity %q): the question is about others", got.Session.Identity)
	}
	if len(got.Holders) != 1 || got.Holders[0].Holder == nil || got.Holders[0].Holder.Identity != "batch-3 (eu-west)" || got.Holders[0].Holder.Token != 1 {
		t.Errorf("holders %+v, want nightly held by batch-3 (eu-west) with token 1", got.Holders)
	}
	inv.cancel(nil)
	inv.wait(t, 10*time.Second)

	r = runSimba(t, "status", "--backend", url, "--identity", "ops", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Session.Identity != "ops" {
		t.Errorf("status's own identity %q (%v), want ops", got.Session.Identity, err)
	}

	// The default is the host name and the process id.
	r = runSimba(t, "status", "--backend", url, "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || !strings.HasSuffix(got.Session.Identity, fmt.Sprintf(":%d", os.Getpid())) {
		t.Errorf("default identity %q (%v), want HOST:%d", got.Session.Identity, err, os.Getpid())
	}
}

// TestStatusHoldersOnRedis: the holder of a lock taken by another simba
// process on the test Redis, and nobody once it released it.
func TestStatusHoldersOnRedis(t *testing.T) {
	url := serverURL(t, "SIMBA_TEST_REDIS_URL", func(v string) string { return v })
	name, free := "cli-holder-"+randomHex(t), "cli-free-"+randomHex(t)
	identity := "cli-test-" + randomHex(t)
	inv := start(t, append([]string{"lock", "--backend", url, "--identity", identity, "--timeout", "20s", name, "--"}, helper(t, "wait")...)...)
	inv.waitOutput(t, "started token=", 20*time.Second)
	var token uint64
	if _, err := fmt.Sscanf(inv.stdout.String(), "started token=%d\n", &token); err != nil {
		t.Fatal(err)
	}

	r := runSimba(t, "status", "--backend", url, "--holder", name+","+free, "--format", "json")
	if r.code != exitOK {
		t.Fatalf("status: exit code %d, stderr %q", r.code, r.stderr)
	}
	var got holdersJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(got.Holders) != 2 {
		t.Fatalf("holders %+v, want 2", got.Holders)
	}
	if h := got.Holders[0].Holder; h == nil || h.Identity != identity || h.Token != token || h.Session == "" {
		t.Errorf("%s: %+v, want held by %s with token %d", name, got.Holders[0], identity, token)
	}
	if !got.Holders[1].Free {
		t.Errorf("%s: %+v, want free", free, got.Holders[1])
	}

	inv.cancel(nil)
	if res := inv.wait(t, 20*time.Second); res.code != 3 {
		t.Fatalf("lock: exit code %d, stderr %q", res.code, res.stderr)
	}
	r = runSimba(t, "status", "--backend", url, "--holder", name)
	if r.code != exitOK || !regexp.MustCompile(`\n`+name+` +free +- +- +-\n`).MatchString(r.stdout) {
		t.Errorf("after the release: exit code %d, stdout:\n%s\nstderr %q", r.code, r.stdout, r.stderr)
	}
}
