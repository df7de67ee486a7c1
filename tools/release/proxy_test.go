package main

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func TestBuildProxy(t *testing.T) {
	_, ws := testWorkspace(t, "v0.1.0")
	out := t.TempDir()
	ps, err := buildProxy(ws, out, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != len(ws.modules) {
		t.Fatalf("%d modules in the proxy, want %d", len(ps), len(ws.modules))
	}
	tests := []struct {
		path      string
		wantFiles []string
		wantMod   string // a line the .mod file holds
	}{
		{
			path:      "example.com/r/tools",
			wantFiles: []string{"LICENSE", "cmd/x/main.go", "go.mod"}, // no nested module; the root LICENSE
			wantMod:   "\texample.com/r/lib v0.1.0\n",
		},
		{
			path:      "example.com/r/ext",
			wantFiles: []string{"LICENSE", "ext.go", "go.mod"}, // its own LICENSE
			wantMod:   "replace example.com/r/lib => ../lib\n", // go.mod as it is
		},
		{
			path:      "example.com/r/lib",
			wantFiles: []string{"LICENSE", "go.mod", "lib.go", "testdata/x.txt"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			dir := filepath.Join(out, filepath.FromSlash(tt.path), "@v")
			list, err := os.ReadFile(filepath.Join(dir, "list"))
			if err != nil || string(list) != "v0.1.0\n" {
				t.Errorf("list = %q, %v; want %q", list, err, "v0.1.0\n")
			}
			var info struct{ Version, Time string }
			data, err := os.ReadFile(filepath.Join(dir, "v0.1.0.info"))
			if err != nil || json.Unmarshal(data, &info) != nil || info.Version != "v0.1.0" || info.Time == "" {
				t.Errorf("info = %s, %v", data, err)
			}
			mod, err := os.ReadFile(filepath.Join(dir, "v0.1.0.mod"))
			if err != nil || !strings.Contains(string(mod), tt.wantMod) {
				t.Errorf(".mod = %q, %v; want it to hold %q", mod, err, tt.wantMod)
			}
			zipName := filepath.Join(dir, "v0.1.0.zip")
			if _, err := modzip.CheckZip(module.Version{Path: tt.path, Version: "v0.1.0"}, zipName); err != nil {
				t.Errorf("CheckZip: %v", err)
			}
			files, zmod := readZip(t, zipName, tt.path+"@v0.1.0/")
			if !slices.Equal(files, tt.wantFiles) {
				t.Errorf("zip files = %v, want %v", files, tt.wantFiles)
			}
			if zmod != string(mod) {
				t.Errorf("the zip's go.mod differs from the .mod file:\n%s\n---\n%s", zmod, mod)
			}
		})
	}

	// A second version is added to the list, in order.
	if _, err := buildProxy(ws, out, "v0.0.9"); err != nil {
		t.Fatal(err)
	}
	list, _ := os.ReadFile(filepath.Join(out, "example.com", "r", "lib", "@v", "list"))
	if string(list) != "v0.0.9\nv0.1.0\n" {
		t.Errorf("list after a second version = %q", list)
	}
}

// readZip returns the sorted file names of a module zip without prefix, and
// the content of its go.mod.
func readZip(t *testing.T, name, prefix string) ([]string, string) {
	t.Helper()
	zr, err := zip.OpenReader(name)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var files []string
	var mod string
	for _, f := range zr.File {
		rel := strings.TrimPrefix(f.Name, prefix)
		files = append(files, rel)
		if rel == "go.mod" {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			mod = string(data)
		}
	}
	slices.Sort(files)
	return files, mod
}

func TestCheckRequiredAt(t *testing.T) {
	_, ws := testWorkspace(t, "v0.1.0")
	if err := ws.checkRequiredAt("v0.1.0"); err != nil {
		t.Errorf("checkRequiredAt(v0.1.0) = %v", err)
	}
	err := ws.checkRequiredAt("v0.2.0")
	if err == nil || !strings.Contains(err.Error(), "tools/go.mod requires example.com/r/lib v0.1.0") {
		t.Errorf("checkRequiredAt(v0.2.0) = %v, want an error naming tools/go.mod", err)
	}
}
