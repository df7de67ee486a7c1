package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	simba "github.com/simba-go/simba/core"
)

var snapshotSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	return c.Compile("../../../docs/snapshot.schema.json")
})

// validSnapshot fails the test unless out, the output of simba status
// --format json, is a document of docs/snapshot.schema.json.
func validSnapshot(t *testing.T, out string) {
	t.Helper()
	validDocument(t, out, "docs/snapshot.schema.json", snapshotSchema)
}

// validDocument fails the test unless out is a document of the schema
// file that schema compiles.
func validDocument(t *testing.T, out, file string, schema func() (*jsonschema.Schema, error)) {
	t.Helper()
	sch, err := schema()
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("the output does not fit %s: %v\n%s", file, err, out)
	}
}

// TestStatusJSONFitsTheSchema: every state of a lease. (Every kind of
// holder is TestHoldersJSONFitsTheSchema's: --holder prints the holders
// document.)
func TestStatusJSONFitsTheSchema(t *testing.T) {
	snap := simba.Snapshot{
		Time:    time.Date(2026, 12, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)),
		Session: simba.SessionSnapshot{ID: "abc", Identity: "ops", Status: simba.StatusLive, Remaining: 14 * time.Second, Renew: 5 * time.Second, Lease: 15 * time.Second},
		Leases: []simba.LeaseSnapshot{
			{Name: "a", Kind: "lock", State: simba.StateHolding, Token: 12, Remaining: 14 * time.Second, Waiters: 2},
			{Name: "b", Kind: "lock", State: simba.StateContending},
			{Name: "c", Kind: "election", State: simba.StateCooldown},
			{Name: "d", Kind: "election", State: simba.StateIdle},
		},
	}
	var b bytes.Buffer
	if err := writeStatusJSON(&b, "redis://h", snap); err != nil {
		t.Fatal(err)
	}
	validSnapshot(t, b.String())
	var got struct {
		Schema string
		Time   string
		Leases []struct{ State string }
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil || got.Schema != simba.SnapshotSchema || got.Time != "2026-12-02T02:04:05Z" {
		t.Errorf("%+v (%v)\n%s", got, err, b.String())
	}

	// And the document of README.md.
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := bytes.Cut(readme, []byte("`--format json` prints"))
	_, rest, ok := bytes.Cut(rest, []byte("```json\n"))
	block, _, closed := bytes.Cut(rest, []byte("```\n"))
	if !ok || !closed {
		t.Fatal("README.md has no json block after \"`--format json` prints\"")
	}
	validSnapshot(t, string(block))
}
