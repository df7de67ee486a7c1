package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	simba "github.com/simba-go/simba/core"
)

var holdersSchemaFile = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	// The holders' definitions are the snapshot schema's, found by its $id.
	f, err := os.Open("../../../docs/snapshot.schema.json")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	if err := c.AddResource("https://github.com/simba-go/simba/docs/snapshot.schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("../../../docs/holders.schema.json")
})

// validHolders fails the test unless out, the output of simba status
// --format json with --holder or --list, is a document of
// docs/holders.schema.json.
func validHolders(t *testing.T, out string) {
	t.Helper()
	validDocument(t, out, "docs/holders.schema.json", holdersSchemaFile)
}

// asksOthers reports whether the arguments of simba status ask about
// other nodes (--holder or --list), whose output is the holders document.
func asksOthers(args []string) bool {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "holder" || name == "list") {
			return true
		}
	}
	return false
}

// listJSON is the output of simba status --list --format json.
type listJSON struct {
	Backend string
	Session *struct{ ID string }
	Held    []struct {
		Name   string
		Holder struct {
			Session  string
			Identity string
			Token    uint64
			Since    time.Time
		}
		AgeMs *int64
	}
	Next      *string
	ListError string
}

func statusList(t *testing.T, args ...string) listJSON {
	t.Helper()
	r := runSimba(t, append([]string{"status", "--list", "--format", "json"}, args...)...)
	if r.code != exitOK || withoutInProcessWarning(r.stderr) != "" {
		t.Fatalf("status --list %v: exit code %d, stderr %q", args, r.code, r.stderr)
	}
	var got listJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if got.Session != nil {
		t.Errorf("status --list shows its own session %s: the question is about others", got.Session.ID)
	}
	return got
}

// TestStatusList: the leases held under a prefix, by pages, with their
// holders, tokens and ages, and not the command's own session.
func TestStatusList(t *testing.T) {
	url := memoryURL(t)
	before := time.Now()
	a := holdLease(t, url, "worker-1", "job-a")
	holdLease(t, url, "worker-2", "job-b")
	holdLease(t, url, "worker-2", "job-c")
	holdLease(t, url, "worker-3", "other")
	after := time.Now()

	got := statusList(t, "--backend", url, "--prefix", "job-", "--limit", "2")
	if len(got.Held) != 2 || got.Held[0].Name != "job-a" || got.Held[1].Name != "job-b" || got.Next == nil || *got.Next != "job-b" {
		t.Fatalf("first page %+v, next %v; want job-a, job-b and a next page after job-b", got.Held, got.Next)
	}
	h := got.Held[0]
	switch {
	case h.Holder.Identity != "worker-1" || h.Holder.Session != string(a.Session()) || h.Holder.Token != a.Token():
		t.Errorf("job-a: %+v, want worker-1, session %s, token %d", h.Holder, a.Session(), a.Token())
	case h.Holder.Since.Before(before) || h.Holder.Since.After(after) || h.Holder.Since.Location() != time.UTC:
		t.Errorf("job-a since %v, want a UTC time in [%v, %v]", h.Holder.Since, before, after)
	case h.AgeMs == nil || *h.AgeMs < 0 || *h.AgeMs > time.Since(before).Milliseconds():
		t.Errorf("job-a age %v ms, want at most %v", h.AgeMs, time.Since(before))
	}
	got = statusList(t, "--backend", url, "--prefix", "job-", "--limit", "2", "--after", *got.Next)
	if len(got.Held) != 1 || got.Held[0].Name != "job-c" || got.Next == nil || *got.Next != "" {
		t.Fatalf("second page %+v, next %v; want job-c and the end", got.Held, got.Next)
	}
	got = statusList(t, "--backend", url, "--prefix", "nothing-")
	if got.Held == nil || len(got.Held) != 0 || got.Next == nil || *got.Next != "" {
		t.Fatalf("an empty listing: %+v, want \"held\": [] and \"next\": \"\"", got)
	}

	r := runSimba(t, "status", "--backend", url, "--list", "--limit", "3")
	if r.code != exitOK || withoutInProcessWarning(r.stderr) != "" {
		t.Fatalf("table: exit code %d, stderr %q", r.code, r.stderr)
	}
	for _, re := range []string{
		`^backend:  ` + regexp.QuoteMeta(url) + "\n\n",
		`\nLEASE  HELD BY   SESSION +TOKEN  AGE\n`,
		`\njob-a  worker-1  ` + string(a.Session()) + `  1      \d+m?s\n`,
		`\nnext page: --after job-c\n$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("no %s in:\n%s", re, r.stdout)
		}
	}
	for _, no := range []string{"session:", "status:", "other"} {
		if strings.Contains(r.stdout, no) {
			t.Errorf("%q in:\n%s", no, r.stdout)
		}
	}
}

// TestStatusListFlags: bad list flags are bad usage, reported before the
// backend is contacted.
func TestStatusListFlags(t *testing.T) {
	for _, tt := range []struct {
		give []string
		want string
	}{
		{[]string{"--prefix", "job-"}, "--prefix needs --list"},
		{[]string{"--limit", "5"}, "--limit needs --list"},
		{[]string{"--after", "job-1"}, "--after needs --list"},
		{[]string{"--list", "--limit", "0"}, `invalid value "0" for flag --limit: 0: want 1 to 1000`},
		{[]string{"--list", "--limit", "1001"}, "want 1 to 1000"},
		{[]string{"--list", "--limit", "ten"}, `"ten" is not a whole number`},
		{[]string{"--list", "--prefix", "job/"}, `character '/' at byte 3 is not one of [A-Za-z0-9._:-]`},
		{[]string{"--list", "--prefix", strings.Repeat("a", 129)}, "name prefix of 129 bytes, at most 128 allowed"},
		{[]string{"--list", "--after", "a b"}, "a cursor is printable ASCII without spaces"},
	} {
		// No server listens on port 1: a contacted backend would be 69.
		r := runSimba(t, append([]string{"status", "--backend", "redis://127.0.0.1:1"}, tt.give...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) || r.stdout != "" {
			t.Errorf("%v: exit code %d, stderr %q, stdout %q; want %d and %q", tt.give, r.code, r.stderr, r.stdout, exitUsage, tt.want)
		}
	}
	// A cursor the backend never returned: refused by the backend.
	r := runSimba(t, "status", "--backend", memoryURL(t), "--list", "--after", "not:a/name")
	if r.code != exitUsage || r.stdout != "" || !strings.HasPrefix(withoutInProcessWarning(r.stderr), "simba status: --list: ") ||
		!strings.HasSuffix(r.stderr, ` (see "simba status --help")`+"\n") {
		t.Errorf("a foreign cursor: exit code %d, stderr %q, stdout %q; want %d", r.code, r.stderr, r.stdout, exitUsage)
	}
}

// TestStatusListOnABackendWithoutIt: a backend that cannot list prints
// nothing and exits with 2.
func TestStatusListOnABackendWithoutIt(t *testing.T) {
	url := holderlessScheme + "://" + strings.TrimPrefix(memoryURL(t), "memory://")
	r := runSimba(t, "status", "--backend", url, "--list", "--format", "json")
	want := "simba status: --list: the backend " + url + " cannot list the leases held (simba: list holders: simba: not supported by the backend)\n"
	if r.code != exitUsage || r.stdout != "" || r.stderr != want {
		t.Errorf("exit code %d, stdout %q, stderr %q; want %d, nothing and %q", r.code, r.stdout, r.stderr, exitUsage, want)
	}
}

// TestStatusListOnRedis: a lock taken by another simba process on the
// test Redis is listed under its prefix, and no longer once released.
func TestStatusListOnRedis(t *testing.T) {
	url := serverURL(t, "SIMBA_TEST_REDIS_URL", func(v string) string { return v })
	prefix := "cli-list-" + randomHex(t) + "-"
	identity := "cli-test-" + randomHex(t)
	inv := start(t, append([]string{"lock", "--backend", url, "--identity", identity, "--timeout", "20s", prefix + "a", "--"}, helper(t, "wait")...)...)
	inv.waitOutput(t, "started token=", 20*time.Second)
	var token uint64
	if _, err := fmt.Sscanf(inv.stdout.String(), "started token=%d\n", &token); err != nil {
		t.Fatal(err)
	}
	walk := func() []string {
		var names []string
		args := []string{"--backend", url, "--prefix", prefix, "--limit", "10"}
		for page := 0; page < 100; page++ {
			got := statusList(t, args...)
			for _, h := range got.Held {
				if h.Holder.Identity != identity || h.Holder.Token != token {
					t.Errorf("%s: %+v, want held by %s with token %d", h.Name, h.Holder, identity, token)
				}
				names = append(names, h.Name)
			}
			if *got.Next == "" {
				return names
			}
			args = append(args[:6], "--after", *got.Next)
		}
		t.Fatal("no end after 100 pages")
		return nil
	}
	if got := walk(); len(got) != 1 || got[0] != prefix+"a" {
		t.Fatalf("listed %v, want %sa", got, prefix)
	}
	inv.cancel(nil)
	if res := inv.wait(t, 20*time.Second); res.code != 3 {
		t.Fatalf("lock: exit code %d, stderr %q", res.code, res.stderr)
	}
	if got := walk(); len(got) != 0 {
		t.Fatalf("after the release: listed %v, want nothing", got)
	}
}

// TestHelpDocumentsList: status --help names the list flags, their
// bounds, the cursor line and the JSON fields.
func TestHelpDocumentsList(t *testing.T) {
	r := runSimba(t, "status", "--help")
	for _, want := range []string{
		"[--list [--prefix PREFIX] [--limit N] [--after CURSOR]]",
		"--list lists the leases held now", `"next page: --after
CURSOR"`, `"held":`, `"ageMs"`, `"next"`, "leaves out this command's own session",
		"--limit N ", "1 to 1000 (default 100)", "--prefix PREFIX ", "--after CURSOR ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status --help does not mention %q:\n%s", want, r.stdout)
		}
	}
}

// TestHoldersJSONFitsTheSchema: every kind of holder and of page (held
// with and without identity or time, empty, not read) fits
// docs/holders.schema.json, and a snapshot document does not.
func TestHoldersJSONFitsTheSchema(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	since := now.Add(-90 * time.Second)
	holders := []holderRead{
		{name: "a", held: true, h: simba.Holder{Session: "e3ea31e4", Identity: "worker-7", Token: 12, Since: since}},
		{name: "b", held: true, h: simba.Holder{Session: "0100", Token: 3}},
		{name: "c"},
		{name: "x", err: errors.New("timeout")},
	}
	page := &listRead{page: simba.HolderPage{Leases: []simba.HeldLease{
		{Name: "job-1", Holder: simba.Holder{Session: "e3ea31e4", Identity: "worker-7", Token: 12, Since: since}},
		{Name: "job-2", Holder: simba.Holder{Session: "0100", Token: 3}},
	}, Next: "job-2"}}
	for _, tt := range []struct {
		name    string
		holders []holderRead
		list    *listRead
	}{
		{"holders", holders, nil},
		{"a page", nil, page},
		{"both", holders, page},
		{"an empty last page", nil, &listRead{}},
		{"a page not read", holders, &listRead{err: errors.New("connection reset")}},
	} {
		var b bytes.Buffer
		if err := writeOthersJSON(&b, "redis://h", tt.holders, tt.list, now); err != nil {
			t.Fatal(err)
		}
		validHolders(t, b.String())
		var got struct {
			Schema, Time string
			Held         []struct{ AgeMs *int64 }
		}
		if err := json.Unmarshal(b.Bytes(), &got); err != nil || got.Schema != "simba.holders/v1" || got.Time != "2026-12-02T02:04:05.678Z" {
			t.Errorf("%s: %+v (%v)\n%s", tt.name, got, err, b.String())
		}
		if tt.list == page && (got.Held[0].AgeMs == nil || *got.Held[0].AgeMs != 90_000 || got.Held[1].AgeMs != nil) {
			t.Errorf("%s: ages %v, want 90000 ms and none\n%s", tt.name, got.Held, b.String())
		}
	}

	sch, err := holdersSchemaFile()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeStatusJSON(&b, "redis://h", simba.Snapshot{Time: now}); err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if sch.Validate(doc) == nil {
		t.Error("a snapshot document fits docs/holders.schema.json: the schema checks nothing")
	}
}

// TestReadmeHoldersDocuments: the JSON examples of README.md's holders
// and listing sections fit docs/holders.schema.json.
func TestReadmeHoldersDocuments(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, marker := range []string{"### Who holds a lease", "### What is held"} {
		_, rest, ok := bytes.Cut(readme, []byte(marker))
		_, rest, found := bytes.Cut(rest, []byte("```json\n"))
		block, _, closed := bytes.Cut(rest, []byte("```\n"))
		if !ok || !found || !closed {
			t.Fatalf("README.md has no json block after %q", marker)
		}
		validHolders(t, string(block))
	}
}
