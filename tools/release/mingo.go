package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// runMinGo is "release min-go".
func runMinGo(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("min-go", errOut)
	toolchain := fs.String("go", "", "the toolchain to build with, like go1.25.14")
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	lang, ok := languageVersion(*toolchain)
	if !ok || fs.NArg() == 0 {
		fmt.Fprintln(errOut, "release min-go: want -go goX.Y.Z and at least one module directory")
		return errUsage
	}
	ws, err := loadWorkspace()
	if err != nil {
		return err
	}
	var mods []*gomod
	for _, dir := range fs.Args() {
		m := ws.module(dir)
		if m == nil {
			return fmt.Errorf("%s is not a module of go.work", dir)
		}
		mods = append(mods, m)
	}
	return minGoCheck(ctx, ws, mods, *toolchain, lang, out)
}

// languageVersion returns "1.25.0" for a release toolchain name such as
// "go1.25.14".
func languageVersion(toolchain string) (string, bool) {
	v, ok := strings.CutPrefix(toolchain, "go")
	if !ok || !semver.IsValid("v"+v) || semver.Prerelease("v"+v) != "" || strings.Count(v, ".") != 2 {
		return "", false
	}
	return strings.TrimPrefix(semver.MajorMinor("v"+v), "v") + ".0", true
}

// minGoCheck checks that each module of mods says "go <lang>" and that the
// toolchain builds and vets all of them, in a temporary go.work holding
// only them (so no module of a newer Go takes part). When the toolchain
// cannot be had, it says so and succeeds.
func minGoCheck(ctx context.Context, ws *workspace, mods []*gomod, toolchain, lang string, out io.Writer) error {
	start := time.Now()
	var wrong []string
	var dirs []string
	for _, m := range mods {
		if m.file.Go == nil || m.file.Go.Version != lang {
			got := "no go line"
			if m.file.Go != nil {
				got = "go " + m.file.Go.Version
			}
			wrong = append(wrong, fmt.Sprintf("%s/go.mod has %s, want go %s", m.dir, got, lang))
		}
		if m.file.Toolchain != nil {
			wrong = append(wrong, fmt.Sprintf("%s/go.mod has a toolchain line: a module users build has none", m.dir))
		}
		dirs = append(dirs, m.dir)
	}
	if len(wrong) > 0 {
		return fmt.Errorf("min-go: %s", strings.Join(wrong, "; "))
	}

	tmp, err := os.MkdirTemp("", "simba-min-go-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	env := withEnv(os.Environ(), "GOTOOLCHAIN="+toolchain, "GOWORK=off")
	if v, err := goVersion(ctx, tmp, env); err != nil {
		reason := err.Error()
		if ce, ok := errors.AsType[*cmdError](err); ok && strings.TrimSpace(ce.out) != "" {
			reason = strings.Join(strings.Fields(ce.out), " ") // go's own words, on one line
		}
		fmt.Fprintf(out, "skipped: min-go: cannot get the %s toolchain: %s\n", toolchain, reason)
		return nil
	} else if v != toolchain {
		return fmt.Errorf("min-go: GOTOOLCHAIN=%s runs %s", toolchain, v)
	}

	// A requirement on a module of a workspace still reads the go.mod of
	// the required version, unless a replace line points it elsewhere; the
	// full workspace has such lines in the modules' go.mod files, this one
	// replaces the version the modules require their siblings at.
	version, err := ws.requiredVersion()
	if err != nil {
		return err
	}
	wf := new(modfile.WorkFile)
	wf.Syntax = new(modfile.FileSyntax)
	if err := wf.AddGoStmt(lang); err != nil {
		return err
	}
	var pkgs []string
	for _, m := range mods {
		if err := wf.AddUse(ws.abs(m), m.path); err != nil {
			return err
		}
		if err := wf.AddReplace(m.path, version, ws.abs(m), ""); err != nil {
			return err
		}
		pkgs = append(pkgs, m.path+"/...")
	}
	work := filepath.Join(tmp, "go.work")
	if err := os.WriteFile(work, modfile.Format(wf.Syntax), 0o644); err != nil {
		return err
	}
	env = withEnv(env, "GOWORK="+work)
	for _, step := range [][]string{{"build"}, {"vet"}} {
		if _, err := runGo(ctx, tmp, env, append(step, pkgs...)...); err != nil {
			return fmt.Errorf("min-go: %s: %w", toolchain, err)
		}
	}
	fmt.Fprintf(out, "ok   min-go: %s builds and vets %s (go %s) in %s\n", toolchain, strings.Join(dirs, ", "), lang, since(start))
	return nil
}
