package main

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writeTree writes files (slash-separated name to content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testWorkspace is a workspace of three modules: lib (no requirement), ext
// (requires lib with a replace line) and tools (requires both without
// replace lines, holds a nested module).
func testWorkspace(t *testing.T, libVersion string) (string, *workspace) {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"go.work":            "go 1.26.0\n\nuse (\n\t./lib\n\t./ext\n\t./tools\n\t./tools/nested\n)\n",
		"LICENSE":            "the license\n",
		"lib/go.mod":         "module example.com/r/lib\n\ngo 1.25.0\n",
		"lib/lib.go":         "package lib\n",
		"lib/testdata/x.txt": "data\n",
		"ext/go.mod": "module example.com/r/ext\n\ngo 1.25.0\n\n" +
			"require (\n\texample.com/r/lib " + libVersion + " // the library\n\texample.com/other v1.2.3\n)\n\n" +
			"replace example.com/r/lib => ../lib\n",
		"ext/ext.go":           "package ext\n",
		"ext/LICENSE":          "ext's own license\n",
		"tools/go.mod":         "module example.com/r/tools\n\ngo 1.25.0\n\nrequire (\n\texample.com/r/ext " + libVersion + "\n\texample.com/r/lib " + libVersion + "\n)\n",
		"tools/cmd/x/main.go":  "package main\n\nfunc main() {}\n",
		"tools/nested/go.mod":  "module example.com/r/tools/nested\n\ngo 1.26.0\n",
		"tools/nested/main.go": "package main\n\nfunc main() {}\n",
	})
	ws, err := readWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, ws
}
