package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadWorkspace(t *testing.T) {
	_, ws := testWorkspace(t, "v0.1.0")
	var dirs []string
	for _, m := range ws.modules {
		dirs = append(dirs, m.dir+"="+m.path)
	}
	want := []string{"lib=example.com/r/lib", "ext=example.com/r/ext", "tools=example.com/r/tools", "tools/nested=example.com/r/tools/nested"}
	if !slices.Equal(dirs, want) {
		t.Errorf("modules = %v, want %v", dirs, want)
	}
	if got := ws.unreplacedSiblings(ws.module("ext")); len(got) != 0 {
		t.Errorf("ext: unreplaced siblings %v, want none", got)
	}
	if got, want := ws.unreplacedSiblings(ws.module("tools")), []string{"example.com/r/ext", "example.com/r/lib"}; !slices.Equal(got, want) {
		t.Errorf("tools: unreplaced siblings %v, want %v", got, want)
	}
}

func TestRequiredVersion(t *testing.T) {
	tests := []struct {
		give    string // the version ext and tools require their siblings at
		want    string
		wantErr string
	}{
		{give: "v0.1.0", want: "v0.1.0"},
		{give: "v1.4.2", want: "v1.4.2"},
		{give: "v0.0.0-00010101000000-000000000000", wantErr: "pseudo-version"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, ws := testWorkspace(t, tt.give)
			got, err := ws.requiredVersion()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("requiredVersion() = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("requiredVersion() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestRequiredVersionDisagreement(t *testing.T) {
	root, _ := testWorkspace(t, "v0.1.0")
	writeTree(t, root, map[string]string{
		"tools/go.mod": "module example.com/r/tools\n\ngo 1.25.0\n\nrequire example.com/r/lib v0.2.0\n",
	})
	ws, err := readWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ws.requiredVersion()
	if err == nil || !strings.Contains(err.Error(), "2 versions") || !strings.Contains(err.Error(), "tools/go.mod: example.com/r/lib") {
		t.Fatalf("requiredVersion() error = %v, want one naming both versions and tools/go.mod", err)
	}
}

func TestCheckVersion(t *testing.T) {
	_, ws := testWorkspace(t, "v0.1.0")
	tests := []struct {
		give string
		ok   bool
	}{
		{"v0.1.0", true},
		{"v1.0.0-rc.1", true},
		{"v0.1", false},
		{"0.1.0", false},
		{"v0.1.0+meta", false},
		{"v2.0.0", false}, // the module paths have no /v2
		{"v0.0.0-20240101000000-abcdefabcdef", false},
	}
	for _, tt := range tests {
		if err := ws.checkVersion(tt.give); (err == nil) != tt.ok {
			t.Errorf("checkVersion(%q) = %v, want ok=%v", tt.give, err, tt.ok)
		}
	}
}

func TestModuleFiles(t *testing.T) {
	root, ws := testWorkspace(t, "v0.1.0")
	files, err := ws.sourceFiles()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err == nil {
		t.Fatal("the test workspace is a git work tree")
	}
	got := moduleFiles(ws.module("tools"), files)
	want := []string{"cmd/x/main.go", "go.mod"}
	if !slices.Equal(got, want) {
		t.Errorf("moduleFiles(tools) = %v, want %v (the nested module left out)", got, want)
	}
	got = moduleFiles(ws.module("lib"), files)
	want = []string{"go.mod", "lib.go", "testdata/x.txt"}
	if !slices.Equal(got, want) {
		t.Errorf("moduleFiles(lib) = %v, want %v", got, want)
	}
}
