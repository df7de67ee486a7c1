package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo installs as $GO a script that answers "env GOVERSION" with
// stdout on its standard output after printing stderr on its standard
// error (exiting with status), and succeeds at every other command.
func fakeGo(t *testing.T, stdout, stderr string, status int) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n" +
		"if [ \"$1 $2\" = \"env GOVERSION\" ]; then\n" +
		"  printf '%s' '" + stderr + "' >&2\n" +
		"  printf '%s' '" + stdout + "'\n" +
		"  exit " + string(rune('0'+status)) + "\n" +
		"fi\n" +
		"exit 0\n"
	p := filepath.Join(dir, "go")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GO", p)
}

// TestMinGoToolchainDownload: on a machine that has never fetched the
// toolchain, go prints "go: downloading ..." on its standard error before
// the version; the check reads the version from the standard output alone.
func TestMinGoToolchainDownload(t *testing.T) {
	tests := []struct {
		name, stdout, stderr string
		status               int
		want                 string // a line of the output
		wantErr              string // a part of the error, "" for none
	}{
		{name: "cached", stdout: "go1.25.14\n", want: "ok   min-go: go1.25.14 builds and vets lib"},
		{name: "downloaded", stdout: "go1.25.14\n", stderr: "go: downloading go1.25.14 (linux/amd64)\n",
			want: "ok   min-go: go1.25.14 builds and vets lib"},
		{name: "cannot be had", stderr: "go: downloading go1.25.14 (linux/amd64)\ngo: download go1.25.14: no network\n", status: 1,
			want: "skipped: min-go: cannot get the go1.25.14 toolchain: go: downloading go1.25.14 (linux/amd64) go: download go1.25.14: no network"},
		{name: "another release", stdout: "go1.26.8\n", stderr: "go: downloading go1.25.14 (linux/amd64)\n",
			wantErr: "GOTOOLCHAIN=go1.25.14 runs go1.26.8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ws := testWorkspace(t, "v0.0.0")
			fakeGo(t, tt.stdout, tt.stderr, tt.status)
			var out bytes.Buffer
			err := minGoCheck(context.Background(), ws, []*gomod{ws.module("lib")}, "go1.25.14", "1.25.0", &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("minGoCheck() = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("minGoCheck(): %v", err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Fatalf("minGoCheck() printed %q, want a line containing %q", out.String(), tt.want)
			}
		})
	}
}
