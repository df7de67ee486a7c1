// Package schematest checks a snapshot document, as the C API and Python
// give it, against docs/snapshot.schema.json. Only the tests of this
// module import it.
package schematest

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var schema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, fmt.Errorf("schematest: no source path to find docs/snapshot.schema.json from")
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	return c.Compile(filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "snapshot.schema.json"))
})

// Validate returns an error, naming every member that does not fit, unless
// doc is a document of docs/snapshot.schema.json.
func Validate(doc []byte) error {
	sch, err := schema()
	if err != nil {
		return fmt.Errorf("docs/snapshot.schema.json: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w\n%s", err, doc)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("the document does not fit docs/snapshot.schema.json: %w\n%s", err, doc)
	}
	return nil
}
