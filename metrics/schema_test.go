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

// The example documents of README.md and docs/observability.md fit the
// schema too.
func TestDocumentedSnapshotsFitSchema(t *testing.T) {
	for _, doc := range []struct{ file, section string }{
		{"README.md", "## The JSON snapshot\n"},
		{"../docs/observability.md", "## The snapshot document\n"},
	} {
		text, err := os.ReadFile(doc.file)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := bytes.Cut(text, []byte(doc.section))
		if !ok {
			t.Errorf("%s has no section %q", doc.file, doc.section)
			continue
		}
		_, rest, ok = bytes.Cut(rest, []byte("```json\n"))
		block, _, closed := bytes.Cut(rest, []byte("```\n"))
		if !ok || !closed {
			t.Errorf("the section %q of %s has no json block", doc.section, doc.file)
			continue
		}
		validSnapshot(t, block)
	}
}
