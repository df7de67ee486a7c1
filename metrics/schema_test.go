package simbametrics_test

import (
	"bytes"
	"os"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var snapshotSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	return c.Compile("../docs/snapshot.schema.json")
})

// validSnapshot fails the test unless body is a document of
// docs/snapshot.schema.json.
func validSnapshot(t *testing.T, body []byte) {
	t.Helper()
	sch, err := snapshotSchema()
	if err != nil {
		t.Fatalf("docs/snapshot.schema.json: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("the document does not fit docs/snapshot.schema.json: %v\n%s", err, body)
	}
}

// The example document of README.md fits the schema too.
func TestReadmeSnapshotFitsSchema(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(readme, []byte("## The JSON snapshot"))
	if !ok {
		t.Fatal(`README.md has no "## The JSON snapshot" section`)
	}
	_, rest, ok = bytes.Cut(rest, []byte("```json\n"))
	block, _, closed := bytes.Cut(rest, []byte("```\n"))
	if !ok || !closed {
		t.Fatal("the JSON snapshot section of README.md has no json block")
	}
	validSnapshot(t, block)
}
