package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// workspace is the repository: the directory holding go.work and the
// modules go.work uses.
type workspace struct {
	root    string   // absolute path of the directory holding go.work
	goWork  string   // the Go version of go.work
	modules []*gomod // the use entries of go.work, in their order
	byPath  map[string]*gomod
}

// gomod is one module of the workspace.
type gomod struct {
	dir  string        // slash-separated path relative to the root, like "backend-redis"
	path string        // module path
	data []byte        // go.mod as read
	file *modfile.File // go.mod parsed
}

// findRoot returns the nearest directory at or above dir holding go.work.
func findRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work in %s or any directory above it", dir)
		}
	}
}

// loadWorkspace reads go.work, found from the current directory, and the
// go.mod file of every module it uses.
func loadWorkspace() (*workspace, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := findRoot(wd)
	if err != nil {
		return nil, err
	}
	return readWorkspace(root)
}

// readWorkspace reads root/go.work and the go.mod files of its modules.
func readWorkspace(root string) (*workspace, error) {
	wf, _, err := readModFile(filepath.Join(root, "go.work"), modfile.ParseWork)
	if err != nil {
		return nil, err
	}
	ws := &workspace{root: root, byPath: map[string]*gomod{}}
	if wf.Go != nil {
		ws.goWork = wf.Go.Version
	}
	for _, u := range wf.Use {
		dir := path.Clean(filepath.ToSlash(u.Path))
		if filepath.IsAbs(u.Path) || dir == "." || strings.HasPrefix(dir, "../") {
			return nil, fmt.Errorf("go.work: use %s: want a directory below the root, other than the root", u.Path)
		}
		m, err := readModule(root, dir)
		if err != nil {
			return nil, err
		}
		if other, dup := ws.byPath[m.path]; dup {
			return nil, fmt.Errorf("go.work: %s and %s are both module %s", other.dir, m.dir, m.path)
		}
		ws.modules = append(ws.modules, m)
		ws.byPath[m.path] = m
	}
	if len(ws.modules) == 0 {
		return nil, errors.New("go.work uses no module")
	}
	return ws, nil
}

// readModFile reads the file name and parses it with parse, modfile.Parse
// or modfile.ParseWork; it returns the parsed file and its bytes.
func readModFile[F any](name string, parse func(string, []byte, modfile.VersionFixer) (F, error)) (F, []byte, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		var none F
		return none, nil, err
	}
	f, err := parse(name, data, nil)
	return f, data, err
}

func readModule(root, dir string) (*gomod, error) {
	f, data, err := readModFile(filepath.Join(root, filepath.FromSlash(dir), "go.mod"), modfile.Parse)
	if err != nil {
		return nil, err
	}
	if f.Module == nil {
		return nil, fmt.Errorf("%s/go.mod has no module line", dir)
	}
	return &gomod{dir: dir, path: f.Module.Mod.Path, data: data, file: f}, nil
}

// abs returns the absolute directory of m.
func (ws *workspace) abs(m *gomod) string {
	return filepath.Join(ws.root, filepath.FromSlash(m.dir))
}

// module returns the module of the workspace whose directory is dir.
func (ws *workspace) module(dir string) *gomod {
	dir = path.Clean(filepath.ToSlash(dir))
	for _, m := range ws.modules {
		if m.dir == dir {
			return m
		}
	}
	return nil
}

// siblingRequires returns the requirements of m on other modules of the
// workspace.
func (ws *workspace) siblingRequires(m *gomod) []*modfile.Require {
	var rs []*modfile.Require
	for _, r := range m.file.Require {
		if _, ok := ws.byPath[r.Mod.Path]; ok {
			rs = append(rs, r)
		}
	}
	return rs
}

// unreplacedSiblings returns the paths of the siblings m requires without a
// replace line: outside the workspace, m resolves them through a proxy.
func (ws *workspace) unreplacedSiblings(m *gomod) []string {
	replaced := map[string]bool{}
	for _, r := range m.file.Replace {
		replaced[r.Old.Path] = true
	}
	var paths []string
	for _, r := range ws.siblingRequires(m) {
		if !replaced[r.Mod.Path] {
			paths = append(paths, r.Mod.Path)
		}
	}
	return paths
}

// checkVersion reports whether v can be the version of every module of ws:
// a canonical semantic version without build metadata, compatible with
// each module path (v2 and above need a /vN path suffix).
func (ws *workspace) checkVersion(v string) error {
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("version %q: want a canonical semantic version such as v0.1.0", v)
	}
	if module.IsPseudoVersion(v) {
		return fmt.Errorf("version %s is a pseudo-version: want a release such as v0.1.0", v)
	}
	for _, m := range ws.modules {
		if err := module.Check(m.path, v); err != nil {
			return err
		}
	}
	return nil
}

// requiredVersion returns the version at which the go.mod files require
// their siblings. It fails when none does, when they disagree, or when the
// version is a pseudo-version.
func (ws *workspace) requiredVersion() (string, error) {
	where := map[string][]string{}
	for _, m := range ws.modules {
		for _, r := range ws.siblingRequires(m) {
			where[r.Mod.Version] = append(where[r.Mod.Version], m.dir+"/go.mod: "+r.Mod.Path)
		}
	}
	switch len(where) {
	case 0:
		return "", errors.New("no go.mod requires a module of the workspace: give -version")
	case 1:
		for v, at := range where {
			if module.IsPseudoVersion(v) {
				return "", fmt.Errorf("%s requires %s at a pseudo-version: run release -version vX.Y.Z", at[0], v)
			}
			return v, nil
		}
	}
	versions := make([]string, 0, len(where))
	for v := range where {
		versions = append(versions, v)
	}
	semver.Sort(versions)
	var b strings.Builder
	fmt.Fprintf(&b, "the go.mod files require their siblings at %d versions; run release -version vX.Y.Z:", len(versions))
	for _, v := range versions {
		fmt.Fprintf(&b, "\n  %s: %s", v, strings.Join(where[v], ", "))
	}
	return "", errors.New(b.String())
}

// loadWorkspaceAt loads the workspace and resolves the version a command
// was given (see resolveVersion).
func loadWorkspaceAt(flagVersion string) (*workspace, string, error) {
	ws, err := loadWorkspace()
	if err != nil {
		return nil, "", err
	}
	v, err := ws.resolveVersion(flagVersion)
	if err != nil {
		return nil, "", err
	}
	return ws, v, nil
}

// resolveVersion returns flagVersion, checked, or the version the go.mod
// files require their siblings at.
func (ws *workspace) resolveVersion(flagVersion string) (string, error) {
	v := flagVersion
	if v == "" {
		var err error
		if v, err = ws.requiredVersion(); err != nil {
			return "", err
		}
	}
	return v, ws.checkVersion(v)
}

// sourceFiles lists, relative to the root and slash-separated, the files of
// the working tree: the files git tracks and the untracked ones it does not
// ignore, as a commit of the whole tree would hold them. Outside a git work
// tree it lists every regular file outside .git directories. The list is
// sorted.
func (ws *workspace) sourceFiles() ([]string, error) {
	cmd := exec.Command("git", "-C", ws.root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || strings.Contains(stderr.String(), "not a git repository") {
			return ws.walkFiles()
		}
		return nil, fmt.Errorf("git ls-files: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		// A tracked file deleted from the working tree is listed too.
		if info, err := os.Lstat(filepath.Join(ws.root, filepath.FromSlash(name))); err == nil && info.Mode().IsRegular() {
			files = append(files, name)
		}
	}
	sort.Strings(files)
	return slices.Compact(files), nil
}

func (ws *workspace) walkFiles() ([]string, error) {
	var files []string
	err := filepath.WalkDir(ws.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(ws.root, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(files)
	return files, err
}

// moduleFiles returns the files of m among files (as sourceFiles lists
// them), relative to m's directory, without those of nested modules: the
// directories below m holding a go.mod of their own.
func moduleFiles(m *gomod, files []string) []string {
	prefix := m.dir + "/"
	var nested []string
	for _, f := range files {
		if rel, ok := strings.CutPrefix(f, prefix); ok && path.Base(rel) == "go.mod" && rel != "go.mod" {
			nested = append(nested, path.Dir(rel)+"/")
		}
	}
	var own []string
	for _, f := range files {
		rel, ok := strings.CutPrefix(f, prefix)
		if !ok {
			continue
		}
		if slices.ContainsFunc(nested, func(n string) bool { return strings.HasPrefix(rel, n) }) {
			continue
		}
		own = append(own, rel)
	}
	return own
}
