package main

import (
	"strings"
	"testing"
)

func isTestSibling(path string) bool { return strings.HasPrefix(path, "example.com/r/") }

func TestWithoutSiblings(t *testing.T) {
	give := "example.com/other v1.0.0 h1:o=\n" +
		"example.com/other v1.0.0/go.mod h1:om=\n" +
		"example.com/r/lib v0.1.0 h1:l=\n" +
		"example.com/r/lib v0.1.0/go.mod h1:lm=\n"
	want := "example.com/other v1.0.0 h1:o=\nexample.com/other v1.0.0/go.mod h1:om=\n"
	if got := string(withoutSiblings([]byte(give), isTestSibling)); got != want {
		t.Errorf("withoutSiblings =\n%s\nwant\n%s", got, want)
	}
	if got := withoutSiblings([]byte("example.com/r/lib v0.1.0 h1:l=\n"), isTestSibling); len(got) != 0 {
		t.Errorf("withoutSiblings of siblings only = %q, want empty", got)
	}
}

func TestKeepSiblingSums(t *testing.T) {
	tests := []struct {
		name string
		old  string
		give string // go mod tidy's go.sum
		want string
	}{
		{
			name: "the recorded checksum of a sibling version is kept",
			old:  "example.com/r/lib v0.1.0 h1:released=\nexample.com/r/lib v0.1.0/go.mod h1:releasedmod=\n",
			give: "example.com/other v1.0.0 h1:o=\nexample.com/r/lib v0.1.0 h1:tree=\nexample.com/r/lib v0.1.0/go.mod h1:treemod=\n",
			want: "example.com/other v1.0.0 h1:o=\nexample.com/r/lib v0.1.0 h1:released=\nexample.com/r/lib v0.1.0/go.mod h1:releasedmod=\n",
		},
		{
			name: "a new sibling version takes the proxy's checksum",
			old:  "example.com/r/lib v0.1.0 h1:released=\n",
			give: "example.com/r/lib v0.2.0 h1:tree=\n",
			want: "example.com/r/lib v0.2.0 h1:tree=\n",
		},
		{
			name: "other modules take tidy's lines",
			old:  "example.com/other v1.0.0 h1:old=\n",
			give: "example.com/other v1.0.0 h1:new=\n",
			want: "example.com/other v1.0.0 h1:new=\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(keepSiblingSums([]byte(tt.old), []byte(tt.give), isTestSibling)); got != tt.want {
				t.Errorf("keepSiblingSums =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestDiffLines(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want string
	}{
		{name: "equal", a: "x\ny\n", b: "x\ny\n", want: ""},
		{name: "changed", a: "x\ny\n", b: "x\nz\n", want: "    go.sum:\n    -y\n    +z\n"},
		{name: "reordered", a: "x\ny\n", b: "y\nx\n", want: "    go.sum:\n    (the same lines in another order)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := diffLines("go.sum", []byte(tt.a), []byte(tt.b)); got != tt.want {
				t.Errorf("diffLines =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
