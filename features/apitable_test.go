package features

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// apiPackages maps the package names the README's API table uses to their
// directories, relative to the repository root; a signature without one
// is core's (package simba).
var apiPackages = map[string]string{
	"simba":        "core",
	"simbametrics": "metrics",
	"simbapg":      "backend-jdbc/postgres",
	"simbamysql":   "backend-jdbc/mysql",
}

// apiSignature is a signature in the API table: "simba.New(b Backend,
// opts ...Option) (*Client, error)", "Client.Holder(ctx context.Context,
// name string) (Holder, bool, error)".
var apiSignature = regexp.MustCompile(`^(?:(simba|simbametrics|simbapg|simbamysql)\.)?(?:([A-Z]\w*)\.)?([A-Z]\w*)(\(.*)$`)

// TestReadmeSignatures checks every signature of the README's API table
// against the declaration in the package's source, as go doc shows it: the
// same parameter and result types in the same order (the names may
// differ). A call-like entry that is not a true signature fails, so that
// the table cannot drift from the code a newcomer compiles against.
func TestReadmeSignatures(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]map[string]*ast.FuncType{} // package name to "Recv.Name" or "Name"
	for name, dir := range apiPackages {
		decls[name] = funcDecls(t, filepath.Join(root, dir))
	}
	spans, err := apiTableSpans(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, sp := range spans {
		m := apiSignature.FindStringSubmatch(sp.text)
		if m == nil {
			continue // a type, a package or a name without a signature
		}
		pkg, recv, name, rest := m[1], m[2], m[3], m[4]
		if pkg == "" {
			pkg = "simba"
		}
		key := name
		if recv != "" {
			key = recv + "." + name
		}
		checked++
		want, ok := decls[pkg][key]
		if !ok {
			t.Errorf("README.md:%d: %s: package %s has no function or method %s", sp.line, sp.text, pkg, key)
			continue
		}
		expr, err := parser.ParseExpr("func" + rest)
		got, isFunc := expr.(*ast.FuncType)
		if err != nil || !isFunc {
			t.Errorf("README.md:%d: %s: not a Go signature (%v)", sp.line, sp.text, err)
			continue
		}
		if g, w := funcTypeString(got), funcTypeString(want); g != w {
			t.Errorf("README.md:%d: %s: the types are %s, go doc says %s", sp.line, sp.text, g, w)
		}
	}
	if checked < 20 {
		t.Errorf("only %d signatures in the API table of README.md: the table moved?", checked)
	}
}

// tableSpan is a code span of the first column of the API table.
type tableSpan struct {
	line int
	text string
}

// apiTableSpans returns the code spans of the first column of the table
// under "## What you get" in the README.
func apiTableSpans(path string) ([]tableSpan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	code := regexp.MustCompile("`([^`]+)`")
	var spans []tableSpan
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## What you get"
		case in && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| API "):
			cells := strings.Split(line, " | ")
			for _, m := range code.FindAllStringSubmatch(strings.TrimPrefix(cells[0], "| "), -1) {
				spans = append(spans, tableSpan{n, m[1]})
			}
		}
	}
	return spans, sc.Err()
}

// funcDecls returns the exported functions and methods of the package in
// dir (its non-test files), by "Name" and "Recv.Name".
func funcDecls(t *testing.T, dir string) map[string]*ast.FuncType {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ast.FuncType{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			key := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				recv := fn.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				key = types.ExprString(recv) + "." + key
			}
			out[key] = fn.Type
		}
	}
	return out
}

// funcTypeString prints a function type without its parameter and result
// names: "func(context.Context, string) (Holder, bool, error)".
func funcTypeString(ft *ast.FuncType) string {
	list := func(fl *ast.FieldList) []string {
		var out []string
		if fl == nil {
			return out
		}
		for _, f := range fl.List {
			n := max(len(f.Names), 1)
			for range n {
				out = append(out, types.ExprString(f.Type))
			}
		}
		return out
	}
	s := "func(" + strings.Join(list(ft.Params), ", ") + ")"
	switch res := list(ft.Results); len(res) {
	case 0:
	case 1:
		s += " " + res[0]
	default:
		s += " (" + strings.Join(res, ", ") + ")"
	}
	return s
}
