package simba_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// The JSON document of a snapshot, member by member: milliseconds as
// integers, rounded down, every member present, the time in UTC.
func TestSnapshotDocumentJSON(t *testing.T) {
	s := simba.Snapshot{
		Time: time.Date(2026, 12, 2, 3, 4, 5, 6_000_000, time.FixedZone("CET", 3600)),
		Session: simba.SessionSnapshot{
			ID: "s-1", Identity: "node-a", Status: simba.StatusLive,
			Remaining: 2999999 * time.Microsecond, Renew: time.Second, Lease: 3 * time.Second,
		},
		Leases: []simba.LeaseSnapshot{
			{Name: "invoice", Kind: "lock", State: simba.StateHolding, Token: 42, Remaining: 1500 * time.Millisecond, Waiters: 1},
			{Name: "report", Kind: "election", State: simba.StateContending},
		},
	}
	got, err := json.Marshal(s.Document())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema":"simba.snapshot/v1","time":"2026-12-02T02:04:05.006Z",` +
		`"session":{"id":"s-1","identity":"node-a","status":"LIVE","remainingMs":2999,"renewIntervalMs":1000,"leaseDurationMs":3000,"leaseShortened":false},` +
		`"leases":[{"name":"invoice","kind":"lock","state":"HOLDING","token":42,"remainingMs":1500,"waiters":1},` +
		`{"name":"report","kind":"election","state":"CONTENDING","token":0,"remainingMs":0,"waiters":0}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	empty, err := json.Marshal(simba.Snapshot{}.Document())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(empty, &doc); err != nil || doc["leases"] == nil {
		t.Errorf("a snapshot without leases: %s (%v), want leases []", empty, err)
	}
}

// The members core encodes are the ones docs/snapshot.schema.json
// requires, and its version is SnapshotSchema: the modules that print a
// snapshot validate their output against the whole schema, this keeps the
// part encoded here in step with it without a validator in core.
func TestSnapshotDocumentMatchesSchema(t *testing.T) {
	raw, err := os.ReadFile("../docs/snapshot.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Const string `json:"const"`
			Enum  []any  `json:"enum"`
		} `json:"properties"`
	}
	var schema struct {
		object
		Defs map[string]object `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("docs/snapshot.schema.json: %v", err)
	}
	if got := schema.Properties["schema"].Const; got != simba.SnapshotSchema {
		t.Errorf("the schema's version is %q, SnapshotSchema %q", got, simba.SnapshotSchema)
	}
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New().Connect())
		term, err := c.Lock("invoice").TryAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = term.Release(context.Background()) }()
		body, err := json.Marshal(c.Snapshot().Document())
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Top     map[string]json.RawMessage
			Session map[string]any   `json:"session"`
			Leases  []map[string]any `json:"leases"`
		}
		if err := json.Unmarshal(body, &doc.Top); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, &doc); err != nil || len(doc.Leases) != 1 {
			t.Fatalf("%s: %v", body, err)
		}
		check := func(what string, members []string, o object) {
			t.Helper()
			slices.Sort(members)
			want := slices.Sorted(slices.Values(o.Required))
			if !slices.Equal(members, want) {
				t.Errorf("%s has %v, the schema requires %v", what, members, want)
			}
		}
		check("the document", keys(doc.Top), schema.object)
		check("the session", keys(doc.Session), schema.Defs["session"])
		check("a lease", keys(doc.Leases[0]), schema.Defs["lease"])
	})
	states := schema.Defs["lease"].Properties["state"].Enum
	for _, s := range []simba.LeaseState{simba.StateHolding, simba.StateContending, simba.StateCooldown, simba.StateIdle} {
		if !slices.Contains(states, any(string(s))) {
			t.Errorf("state %s is not in the schema's %v", s, states)
		}
	}
	statuses := schema.Defs["session"].Properties["status"].Enum
	for _, s := range []simba.Status{simba.StatusOpening, simba.StatusLive, simba.StatusSuspended, simba.StatusClosed} {
		if !slices.Contains(statuses, any(s.String())) {
			t.Errorf("status %s is not in the schema's %v", s, statuses)
		}
	}
}

func keys[V any](m map[string]V) []string { return slices.Collect(maps.Keys(m)) }

// A document read back gives the snapshot it was written from, to the
// millisecond; a status the schema does not know is refused.
func TestSnapshotDocumentRoundTrip(t *testing.T) {
	want := simba.Snapshot{
		Time: time.Date(2026, 12, 2, 3, 4, 5, 6_000_000, time.UTC),
		Session: simba.SessionSnapshot{
			ID: "s-1", Identity: "node-a", Status: simba.StatusSuspended,
			Remaining: 2999 * time.Millisecond, Renew: time.Second, Lease: 3 * time.Second, Shortened: true,
		},
		Leases: []simba.LeaseSnapshot{
			{Name: "invoice", Kind: "lock", State: simba.StateHolding, Token: 42, Remaining: 1500 * time.Millisecond, Waiters: 1},
			{Name: "report", Kind: "election", State: simba.StateCooldown},
		},
	}
	body, err := json.Marshal(want.Document())
	if err != nil {
		t.Fatal(err)
	}
	var got simba.SnapshotDocument
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Schema != simba.SnapshotSchema || !got.Time.Equal(want.Time) || got.Session != want.Session || !slices.Equal(got.Leases, want.Leases) {
		t.Errorf("read back %+v\nfrom %s\nwant %+v", got, body, want)
	}
	bad := strings.Replace(string(body), `"SUSPENDED"`, `"ASLEEP"`, 1)
	if err := json.Unmarshal([]byte(bad), &got); err == nil {
		t.Errorf("status ASLEEP read without an error")
	}
}
