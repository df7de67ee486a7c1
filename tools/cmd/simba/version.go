package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is the release of simba; builds set it with
// -ldflags "-X main.version=v1.2.3". Empty means: ask the build info.
var version = ""

const versionAbout = `
Prints the version of simba, the Go release that built it, and the backend
URL schemes it can open.
`

// runVersion is "simba version".
func runVersion(_ context.Context, a *app, args []string) int {
	f := newFlags("version", "version", versionAbout)
	if _, err := f.parseArgs(args, 0, ""); err != nil {
		return f.fail(a, err)
	}
	fmt.Fprintf(a.stdout, "simba %s (%s, %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(a.stdout, "backends: %s\n", schemeList())
	return exitOK
}

// buildVersion returns version, else the module version and VCS revision
// recorded in the binary, else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += " " + rev[:min(12, len(rev))] + modified
	}
	return v
}
