package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestVersionClaims checks the documents of this repository: every Go
// release and dependency version they name is the one the go.mod files,
// go.work and the Makefile give. make test runs it with the other tests of
// this module.
func TestVersionClaims(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := findRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := readWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := versionsCheck(ws, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(strings.TrimSpace(out.String()))
}

// claimsWorkspace is a workspace whose library module lib says go 1.25.0
// and requires go-redis v9.22.0, and whose tools module says go 1.26.0 and
// requires go-redis v9.23.0; the Makefile names lib as the module users
// build. docs are added to the tree.
func claimsWorkspace(t *testing.T, docs map[string]string) *workspace {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.work":                   "go 1.26.0\n\nuse (\n\t./lib\n\t./tools\n)\n",
		"Makefile":                  "GO_MIN_TOOLCHAIN ?= go1.25.14\nMIN_GO_MODULES ?= lib\nGOLANGCI_LINT_VERSION ?= v2.15.0\n",
		"lib/go.mod":                "module example.com/r/lib\n\ngo 1.25.0\n\nrequire github.com/redis/go-redis/v9 v9.22.0\n",
		"README.md":                 "go install example.com/r/tools/cmd/simba@latest\n",
		"tools/cmd/simba/README.md": "go install example.com/r/tools/cmd/simba@latest\n",
		"tools/go.mod": "module example.com/r/tools\n\ngo 1.26.0\n\nrequire (\n\texample.com/r/lib v0.1.0\n\t" +
			"github.com/redis/go-redis/v9 v9.23.0\n)\n",
		"CONTRIBUTING.md": "| dir | module | go line | what |\n|---|---|---|---|\n" +
			"| `lib` | `example.com/r/lib` | 1.25.0 | the library |\n| `tools` | `.../tools` | 1.26.0 | the tools |\n",
	}
	for name, text := range docs {
		files[name] = text
	}
	writeTree(t, root, files)
	ws, err := readWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestVersionClaimsFound(t *testing.T) {
	tests := []struct {
		name string
		docs map[string]string
		want []string // the problems, in order; none for a tree whose claims hold
	}{
		{name: "true claims", docs: map[string]string{
			"README.md": "The modules build with Go 1.25 or\nlater; the workspace needs Go 1.26 (go.work says `go 1.26.0`).\n" +
				"It uses go-redis v9, go-redis v9.22 and go-redis v9.22.0; lint with golangci-lint v2.\n" +
				"go install example.com/r/tools/cmd/simba@latest\n",
			"lib/README.md":        "Needs Go 1.25+ and go-redis v9.22.0.\n",
			"tools/README.md":      "Needs Go 1.26 and go-redis v9.23.0.\n",
			"CHANGELOG.md":         "Go 1.21 and go-redis v9.1.0 once.\n",
			"docs/adr/0001-x.md":   "At the time, Go 1.22.\n",
			".hidden/README.md":    "Go 1.20\n",
			"lib/venv/pyvenv.cfg":  "home = /usr/bin\n",
			"lib/venv/x/README.md": "Go 1.19\n",
		}},
		{name: "a module's Go release", docs: map[string]string{
			"lib/README.md": "Setup.\n\nThe module needs Go 1.26 (go-redis v9.23 does).\n",
		}, want: []string{
			`lib/README.md:3: "Go 1.26", but lib/go.mod says go 1.25`,
			"lib/README.md:3: go-redis v9.23, but lib/go.mod requires v9.22.0 (what go get resolves)",
		}},
		{name: "a Go release of no module", docs: map[string]string{
			"docs/guide.md": "Go 1.24 or later.\n",
		}, want: []string{`docs/guide.md:1: "Go 1.24", but lib/go.mod says go 1.25; tools/go.mod and go.work say go 1.26`}},
		{name: "the oldest Go", docs: map[string]string{
			"docs/guide.md": "The modules you import build with\nGo 1.26 or later.\n",
		}, want: []string{`docs/guide.md:1: "build with\nGo 1.26": the oldest Go the modules users build support is 1.25 (GO_MIN_TOOLCHAIN go1.25.14 in the Makefile)`}},
		{name: "a dependency at the top", docs: map[string]string{
			"docs/guide.md": "Redis through go-redis v9.23.0.\n",
		}, want: []string{"docs/guide.md:1: go-redis v9.23.0, but lib/go.mod requires v9.22.0 (what go get resolves)"}},
		{name: "a dependency the module does not require", docs: map[string]string{
			"lib/README.md": "Like pgx v5.\n",
		}, want: []string{"lib/README.md:1: pgx v5, but no go.mod in lib requires github.com/jackc/pgx/v5"}},
		{name: "a tool", docs: map[string]string{
			"docs/guide.md": "golangci-lint v1.64\n",
		}, want: []string{"docs/guide.md:1: golangci-lint v1.64, but the Makefile pins golangci-lint v2.15.0 (GOLANGCI_LINT_VERSION)"}},
		{name: "the install line", docs: map[string]string{
			"tools/cmd/simba/README.md": "go build -o bin/simba ./tools/cmd/simba (go install does not work yet)\n",
		}, want: []string{`tools/cmd/simba/README.md: no "go install example.com/r/tools/cmd/simba@latest", the install that make goget-check proves`}},
		{name: "the module table", docs: map[string]string{
			"CONTRIBUTING.md": "| dir | module | go line | what |\n|---|---|---|---|\n| `lib` | `.../lib` | 1.26.0 | the library |\n",
		}, want: []string{
			"CONTRIBUTING.md:3: the module table gives lib the go line 1.26.0, but lib/go.mod says go 1.25.0",
			"CONTRIBUTING.md:3: the module table has no row for the module tools",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := claimsWorkspace(t, tt.docs)
			r, err := checkVersionClaims(ws)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.problems, tt.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(r.problems, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestVersionClaimsMinModules: a module users build whose go line is not
// the Makefile's oldest Go is reported, whatever the documents say.
func TestVersionClaimsMinModules(t *testing.T) {
	ws := claimsWorkspace(t, map[string]string{
		"Makefile": "GO_MIN_TOOLCHAIN ?= go1.25.14\nMIN_GO_MODULES ?= lib tools\n",
	})
	r, err := checkVersionClaims(ws)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tools/go.mod says go 1.26.0: the Makefile's GO_MIN_TOOLCHAIN go1.25.14 wants go 1.25.0 for the modules users build"}
	if !slices.Equal(r.problems, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(r.problems, "\n"), strings.Join(want, "\n"))
	}
}
