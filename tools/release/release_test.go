package main

import (
	"slices"
	"strings"
	"testing"
)

func TestSetSiblingVersions(t *testing.T) {
	_, ws := testWorkspace(t, "v0.0.0-00010101000000-000000000000")
	changes, err := setSiblingVersions(ws, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.String())
	}
	want := []string{
		"ext/go.mod: example.com/r/lib v0.0.0-00010101000000-000000000000 -> v0.1.0",
		"tools/go.mod: example.com/r/ext v0.0.0-00010101000000-000000000000 -> v0.1.0, example.com/r/lib v0.0.0-00010101000000-000000000000 -> v0.1.0",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ext := string(changes[0].data)
	for _, line := range []string{
		"\texample.com/r/lib v0.1.0 // the library\n", // the comment kept
		"\texample.com/other v1.2.3\n",                // another module untouched
		"replace example.com/r/lib => ../lib\n",       // the replace line kept
	} {
		if !strings.Contains(ext, line) {
			t.Errorf("ext/go.mod lacks %q:\n%s", line, ext)
		}
	}

	// Setting the same version again changes nothing.
	_, ws = testWorkspace(t, "v0.1.0")
	if changes, err := setSiblingVersions(ws, "v0.1.0"); err != nil || len(changes) != 0 {
		t.Errorf("setSiblingVersions at the required version = %v, %v; want no change", changes, err)
	}
}

func TestCheckInstallable(t *testing.T) {
	root, ws := testWorkspace(t, "v0.1.0")
	if err := checkInstallable(ws); err != nil {
		t.Fatalf("tools without replace lines: %v", err)
	}
	writeTree(t, root, map[string]string{
		"tools/go.mod": "module example.com/r/tools\n\ngo 1.25.0\n\nrequire example.com/r/lib v0.1.0\n\nreplace example.com/r/lib => ../lib\n",
	})
	ws, err := readWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkInstallable(ws); err == nil || !strings.Contains(err.Error(), "replace") {
		t.Fatalf("tools with a replace line: %v, want an error", err)
	}
}

func TestTagNames(t *testing.T) {
	_, ws := testWorkspace(t, "v0.1.0")
	got := tagNames(ws, "v0.2.0")
	want := []string{"lib/v0.2.0", "ext/v0.2.0", "tools/v0.2.0", "tools/nested/v0.2.0"}
	if !slices.Equal(got, want) {
		t.Errorf("tagNames = %v, want %v", got, want)
	}
}

func TestLanguageVersion(t *testing.T) {
	tests := []struct {
		give string
		want string
		ok   bool
	}{
		{"go1.25.14", "1.25.0", true},
		{"go1.26.0", "1.26.0", true},
		{"go1.25", "", false},
		{"go1.25rc1", "", false},
		{"1.25.3", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := languageVersion(tt.give)
		if got != tt.want || ok != tt.ok {
			t.Errorf("languageVersion(%q) = %q, %v; want %q, %v", tt.give, got, ok, tt.want, tt.ok)
		}
	}
}

func TestWithEnv(t *testing.T) {
	got := withEnv([]string{"A=1", "GOFLAGS=-x", "B=2"}, "GOFLAGS=-mod=mod", "C=3")
	want := []string{"A=1", "B=2", "GOFLAGS=-mod=mod", "C=3"}
	if !slices.Equal(got, want) {
		t.Errorf("withEnv = %v, want %v", got, want)
	}
}
