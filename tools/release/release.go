package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

// runRelease is "release -version vX.Y.Z [-check] [-full] [-tag T]".
func runRelease(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("release", errOut)
	version := fs.String("version", "", "the version of every module, like v0.1.0 (default with -check: the version the go.mod files name)")
	check := fs.Bool("check", false, "write nothing: check that the go.mod files already name the version and that the workspace passes the checks")
	full := fs.Bool("full", false, "run make test (servers, every module) instead of make test-core")
	tag := fs.String("tag", "", "a pushed tag, like core/v0.1.0, to check against the workspace and HEAD")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *version == "" && !*check {
		fmt.Fprintln(errOut, "release: -version is required (or -check, to check the version the go.mod files name)")
		return errUsage
	}
	ws, v, err := loadWorkspaceAt(*version)
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(out, "release %s of %d modules\n", v, len(ws.modules))
	if err := checkInstallable(ws); err != nil {
		return err
	}
	if *tag != "" {
		if err := checkTag(ctx, ws, *tag, v, out); err != nil {
			return err
		}
	}
	if untracked := untrackedFiles(ctx, ws); len(untracked) > 0 {
		fmt.Fprintf(out, "note: %d untracked files are inside modules; the checksums written below include them, a tag would not (commit or remove them):\n    %s\n",
			len(untracked), strings.Join(untracked, "\n    "))
	}

	changes, err := setSiblingVersions(ws, v)
	if err != nil {
		return err
	}
	if *check {
		if len(changes) > 0 {
			for _, c := range changes {
				fmt.Fprintf(out, "FAIL %s\n", c)
			}
			return fmt.Errorf("the go.mod files do not name every sibling at %s: run release -version %s", v, v)
		}
		fmt.Fprintf(out, "ok   every go.mod names its siblings at %s\n", v)
	} else {
		for _, c := range changes {
			fmt.Fprintf(out, "set  %s\n", c)
		}
		if err := writeModFiles(ws, changes); err != nil {
			return err
		}
		if ws, err = readWorkspace(ws.root); err != nil {
			return err
		}
	}

	// go.sum of a module without replace lines records the siblings as
	// they are now: what the tags will serve.
	if err := tidyAll(ctx, ws, tidyOptions{write: !*check, exactSiblingSums: true}, out); err != nil {
		return err
	}
	if err := buildAndVet(ctx, ws, out); err != nil {
		return err
	}
	target := "test-core"
	if *full {
		target = "test"
	}
	fmt.Fprintf(out, "run  make %s\n", target)
	if err := runMake(ctx, ws.root, target, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "ok   make %s\n", target)
	if err := gogetCheck(ctx, ws, v, false, out); err != nil {
		return err
	}

	fmt.Fprintf(out, "release %s: every check passed in %s.\n", v, since(start))
	if *check {
		return nil
	}
	fmt.Fprint(out, "\nCommit the go.mod and go.sum files, then tag that commit and push the tags one at a time\n"+
		"(GitHub starts no workflow for a push of more than three tags):\n\n")
	for _, t := range tagNames(ws, v) {
		fmt.Fprintf(out, "git tag -a %s -m %q\n", t, strings.Replace(t, "/v", " v", 1))
	}
	fmt.Fprintln(out)
	for _, t := range tagNames(ws, v) {
		fmt.Fprintf(out, "git push origin %s\n", t)
	}
	return nil
}

// tagNames returns the tags of a release: one per module directory.
func tagNames(ws *workspace, v string) []string {
	var tags []string
	for _, m := range ws.modules {
		tags = append(tags, m.dir+"/"+v)
	}
	return tags
}

// modChange is a go.mod whose sibling requirements were set.
type modChange struct {
	mod   *gomod
	edits []string // "path old -> new"
	data  []byte   // the new go.mod
}

func (c modChange) String() string {
	return c.mod.dir + "/go.mod: " + strings.Join(c.edits, ", ")
}

// setSiblingVersions sets every requirement of a module of ws on a sibling
// to version, in memory, and returns the go.mod files that changed with
// their new content.
func setSiblingVersions(ws *workspace, version string) ([]modChange, error) {
	var changes []modChange
	for _, m := range ws.modules {
		f, err := modfile.Parse(m.dir+"/go.mod", m.data, nil)
		if err != nil {
			return nil, err
		}
		var edits []string
		for _, r := range ws.siblingRequires(m) {
			if r.Mod.Version == version {
				continue
			}
			edits = append(edits, fmt.Sprintf("%s %s -> %s", r.Mod.Path, r.Mod.Version, version))
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return nil, err
			}
		}
		if len(edits) == 0 {
			continue
		}
		f.Cleanup()
		data, err := f.Format()
		if err != nil {
			return nil, err
		}
		changes = append(changes, modChange{mod: m, edits: edits, data: data})
	}
	return changes, nil
}

func writeModFiles(ws *workspace, changes []modChange) error {
	for _, c := range changes {
		if err := os.WriteFile(filepath.Join(ws.abs(c.mod), "go.mod"), c.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkInstallable fails when the module users go install from has replace
// or exclude lines: go install module@version refuses such a module.
func checkInstallable(ws *workspace) error {
	m := ws.module(commandModule)
	if m == nil {
		return fmt.Errorf("%s is not a module of go.work", commandModule)
	}
	if len(m.file.Replace) > 0 || len(m.file.Exclude) > 0 {
		return fmt.Errorf("%s/go.mod has replace or exclude lines: go install %s/...@version would refuse it", m.dir, m.path)
	}
	return nil
}

// checkTag checks a pushed tag: it names a module directory of ws at
// version, and it and every other tag of the release made so far point at
// HEAD.
func checkTag(ctx context.Context, ws *workspace, tag, version string, out io.Writer) error {
	dir, v := path.Split(tag)
	dir = strings.TrimSuffix(dir, "/")
	if v != version {
		return fmt.Errorf("tag %s: its version is not %s", tag, version)
	}
	if ws.module(dir) == nil {
		return fmt.Errorf("tag %s: %s is not a module directory of go.work", tag, dir)
	}
	head, err := gitRev(ctx, ws.root, "HEAD")
	if err != nil {
		return err
	}
	var other []string
	for _, t := range tagNames(ws, version) {
		rev, err := gitRev(ctx, ws.root, "refs/tags/"+t)
		if err != nil {
			continue // not pushed yet
		}
		if rev != head {
			other = append(other, t)
		}
	}
	if len(other) > 0 {
		return fmt.Errorf("tags of %s point at another commit than HEAD %s: %s", version, head, strings.Join(other, ", "))
	}
	fmt.Fprintf(out, "ok   tag %s: module %s at %s, HEAD %.12s\n", tag, dir, version, head)
	return nil
}

// untrackedFiles lists the files git does not track nor ignore inside the
// modules of ws; nothing outside a git work tree.
func untrackedFiles(ctx context.Context, ws *workspace) []string {
	out, err := runIn(ctx, ws.root, nil, "git", "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil
	}
	var files []string
	for f := range strings.SplitSeq(out, "\x00") {
		for _, m := range ws.modules {
			if strings.HasPrefix(f, m.dir+"/") {
				files = append(files, f)
				break
			}
		}
	}
	return files
}

// gitRev returns the commit rev names.
func gitRev(ctx context.Context, root, rev string) (string, error) {
	out, err := runIn(ctx, root, nil, "git", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// buildAndVet runs go build ./... and go vet ./... in every module, in the
// workspace.
func buildAndVet(ctx context.Context, ws *workspace, out io.Writer) error {
	for _, m := range ws.modules {
		start := time.Now()
		for _, step := range []string{"build", "vet"} {
			if _, err := runGo(ctx, ws.abs(m), nil, step, "./..."); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "ok   go build ./... && go vet ./... in %s (%s)\n", m.dir, since(start))
	}
	return nil
}

// runMake runs make target in root, its output copied to out.
func runMake(ctx context.Context, root, target string, out io.Writer) error {
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", target)
	cmd.Dir = root
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("make %s: %w", target, err)
	}
	return nil
}
