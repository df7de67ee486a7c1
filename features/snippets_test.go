package features

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docsWithSnippets are the documents whose Go snippets must compile as
// shown, relative to the repository root: the README of the repository and
// of every module, and the guides under docs/.
var docsWithSnippets = []string{
	"README.md",
	"backend-jdbc/README.md",
	"backend-redis/README.md",
	"backend-zk/README.md",
	"fxsimba/README.md",
	"metrics/README.md",
	"docs/fencing.md",
	"docs/observability.md",
}

// snippet is one ```go block of a document.
type snippet struct {
	doc  string
	line int // of the opening fence
	code string
}

// TestSnippetsCompile extracts every ```go block of the documents above and
// type-checks it with go vet as a package of its own inside this module, so
// that it resolves every module of the workspace. Each block must be a
// whole file: a package clause, its imports and its code, as a reader
// would paste it.
func TestSnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var snippets []snippet
	for _, doc := range docsWithSnippets {
		found, err := readSnippets(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i := range found {
			found[i].doc = doc
		}
		snippets = append(snippets, found...)
	}
	if len(snippets) == 0 {
		t.Fatal("no Go snippet found: the documents moved?")
	}
	// Inside this module, so that go vet resolves the workspace: t.TempDir is elsewhere.
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("testdata", "snippets") //nolint:usetesting // must be inside the module
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	where := make(map[string]snippet)
	for i, s := range snippets {
		if !strings.HasPrefix(strings.TrimSpace(s.code), "package ") {
			t.Errorf("%s:%d: the snippet is not a whole file (it must start with a package clause)", s.doc, s.line)
			continue
		}
		pkg := filepath.Join(dir, fmt.Sprintf("s%02d", i))
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "snippet.go"), []byte(s.code), 0o600); err != nil {
			t.Fatal(err)
		}
		where[filepath.Base(pkg)] = s
	}
	out, err := exec.Command("go", "vet", "./"+filepath.ToSlash(dir)+"/...").CombinedOutput()
	if err == nil {
		return
	}
	// Name the document and line of each failing snippet.
	msg := string(out)
	for name, s := range where {
		msg = strings.ReplaceAll(msg, filepath.ToSlash(filepath.Join(dir, name, "snippet.go")), fmt.Sprintf("%s (snippet at line %d)", s.doc, s.line))
	}
	t.Fatalf("snippets that do not compile:\n%s", msg)
}

// readSnippets returns the ```go blocks of a Markdown file.
func readSnippets(path string) ([]snippet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []snippet
	var cur *snippet
	var code bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{line: n}
			code.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = code.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			code.WriteString(line)
			code.WriteByte('\n')
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a ```go block is not closed", path, cur.line)
	}
	return out, sc.Err()
}
