package features

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// goSource is a Go file of the repository or a Go snippet of a document.
type goSource struct {
	name    string // relative to the root, slash-separated
	line    int    // of the opening fence of a snippet, 0 for a file
	snippet bool
	file    *ast.File
	fset    *token.FileSet
}

// pos returns "name:line" of a node of s.
func (s goSource) pos(n ast.Node) string {
	return s.name + ":" + strconv.Itoa(s.line+s.fset.Position(n.Pos()).Line)
}

// goSources parses every Go file of the repository (but hidden
// directories and the scratch space of TestSnippetsCompile) and every Go
// snippet of docsWithSnippets. A file that does not parse is left out:
// the builds and TestSnippetsCompile report it.
func goSources(t *testing.T) []goSource {
	t.Helper()
	parsed.once.Do(func() { parsed.sources, parsed.err = parseSources() })
	if parsed.err != nil {
		t.Fatal(parsed.err)
	}
	return parsed.sources
}

// parsed holds the sources goSources parsed once for the tests that use them.
var parsed struct {
	once    sync.Once
	sources []goSource
	err     error
}

func parseSources() ([]goSource, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return nil, err
	}
	var sources []goSource
	add := func(name string, line int, snippet bool, code string) {
		fset := token.NewFileSet()
		if f, err := parser.ParseFile(fset, name, code, 0); err == nil {
			sources = append(sources, goSource{name: name, line: line, snippet: snippet, file: f, fset: fset})
		}
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") || p == filepath.Join(root, "features", "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		add(filepath.ToSlash(rel), 0, false, string(data))
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, doc := range docsWithSnippets {
		found, err := readSnippets(filepath.Join(root, doc))
		if err != nil {
			return nil, err
		}
		for _, s := range found {
			add(doc, s.line, true, s.code)
		}
	}
	return sources, nil
}

// TestStopSignalsIncludeSIGTERM: every program of the repository, and every
// Go snippet of the documents, that stops on os.Interrupt stops on SIGTERM
// too. SIGTERM is what Kubernetes, systemd and Docker send: a program that
// does not catch it dies with its leases held (exit status 143), and the
// next node waits a whole lease before it takes over.
func TestStopSignalsIncludeSIGTERM(t *testing.T) {
	calls := 0
	for _, src := range goSources(t) {
		ast.Inspect(src.file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || types.ExprString(sel.X) != "signal" || (sel.Sel.Name != "Notify" && sel.Sel.Name != "NotifyContext") {
				return true
			}
			calls++
			var sigs []string
			for _, a := range call.Args[1:] {
				sigs = append(sigs, types.ExprString(a))
			}
			interrupt := slices.Contains(sigs, "os.Interrupt") || slices.Contains(sigs, "syscall.SIGINT")
			term := slices.ContainsFunc(sigs, func(s string) bool { return strings.HasSuffix(s, ".SIGTERM") })
			if interrupt && !term {
				t.Errorf("%s: signal.%s(..., %s) stops on an interrupt but not on SIGTERM: add syscall.SIGTERM",
					src.pos(call), sel.Sel.Name, strings.Join(sigs, ", "))
			}
			return true
		})
	}
	if calls == 0 {
		t.Fatal("no signal.Notify or signal.NotifyContext call found: the sources moved?")
	}
}

// TestNoExitAfterDefer: in the Go snippets of the documents and in the
// examples (the code users copy), no function calls log.Fatal or os.Exit
// after deferring a Close: they exit at once, without running the deferred
// calls, so a deferred client.Close would never release the leases, nor a
// Zookeeper backend's Close end its sessions. Return the error to main and
// exit there instead.
func TestNoExitAfterDefer(t *testing.T) {
	checked := 0
	for _, src := range goSources(t) {
		if !src.snippet && !strings.Contains("/"+src.name, "/example/") && !strings.HasPrefix(src.name, "tools/release/testdata/goget/") {
			continue
		}
		for _, decl := range src.file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			checked++
			var deferred *ast.DeferStmt
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					return false // a function of its own
				case *ast.DeferStmt:
					if deferred == nil && closes(n) {
						deferred = n
					}
					return false
				case *ast.CallExpr:
					if name := types.ExprString(n.Fun); deferred != nil && exits(name) {
						t.Errorf("%s: %s after the defer at line %s, which it skips: return the error and exit in main",
							src.pos(n), name, strconv.Itoa(src.line+src.fset.Position(deferred.Pos()).Line))
					}
				}
				return true
			})
		}
	}
	if checked == 0 {
		t.Fatal("no function checked: the sources moved?")
	}
}

// closes reports whether a defer calls a Close method, directly or in the
// function literal it defers.
func closes(d *ast.DeferStmt) bool {
	found := false
	ast.Inspect(d.Call, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Close" {
				found = true
			}
		}
		return !found
	})
	return found
}

// exits reports whether the function named name ends the process without
// running deferred calls.
func exits(name string) bool {
	return name == "os.Exit" || name == "log.Fatal" || name == "log.Fatalf" || name == "log.Fatalln"
}
