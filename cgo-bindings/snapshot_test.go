package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/cgo-bindings/internal/schematest"
)

// snapshotLines returns the JSON of every "snapshot: " line of out, and
// fails the test when there is none.
func snapshotLines(t *testing.T, out string) []string {
	t.Helper()
	var docs []string
	for line := range strings.Lines(out) {
		if doc, ok := strings.CutPrefix(line, "snapshot: "); ok {
			docs = append(docs, strings.TrimSuffix(doc, "\n"))
		}
	}
	if len(docs) == 0 {
		t.Fatalf("no snapshot printed:\n%s", out)
	}
	return docs
}

// validSnapshots fails the test unless every "snapshot: " line of out is
// a document of docs/snapshot.schema.json.
func validSnapshots(t *testing.T, out string) {
	t.Helper()
	for _, doc := range snapshotLines(t, out) {
		if err := schematest.Validate([]byte(doc)); err != nil {
			t.Error(err)
		}
	}
}

// pythonSnapshots prints Client.snapshot() as Python gives it (json.dumps
// of the dict), with a lock held, an election led and with nothing.
const pythonSnapshots = `
import json, sys, threading, simba

def show(c):
    print("snapshot: " + json.dumps(c.snapshot()), flush=True)

with simba.Client(sys.argv[1], lease=3, identity="py-1") as c:
    show(c)
    with c.lock("job", timeout=5):
        elected = threading.Event()
        el = c.election("leader", on_elected=lambda term: elected.set())
        assert elected.wait(5), "not elected"
        s = c.snapshot()
        assert [(l["name"], l["state"]) for l in s["leases"]] == [("job", "HOLDING"), ("leader", "HOLDING")], s
        assert isinstance(s["session"]["remainingMs"], int) and 0 < s["session"]["remainingMs"] <= 3000, s
        show(c)
        el.stop()
`

// TestPythonSnapshotFitsTheSchema: the snapshot of Python's Client is the
// document of docs/snapshot.schema.json.
func TestPythonSnapshotFitsTheSchema(t *testing.T) {
	cmd := exec.Command(python(t, "json"), "-c", pythonSnapshots, "memory://py-snapshot")
	cmd.Dir, cmd.Env = "python", pythonEnv(t)
	validSnapshots(t, run(t, time.Minute, cmd))
}

// TestReadmeSnapshotFitsTheSchema: the example of README.md is a document
// of the schema too.
func TestReadmeSnapshotFitsTheSchema(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(readme), "### The snapshot\n")
	_, rest, ok := strings.Cut(rest, "```json\n")
	block, _, closed := strings.Cut(rest, "```\n")
	if !ok || !closed {
		t.Fatal(`README.md has no json block under "### The snapshot"`)
	}
	if err := schematest.Validate([]byte(block)); err != nil {
		t.Error(err)
	}
}
