package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// proxied is one module written to a file-system proxy.
type proxied struct {
	mod   *gomod
	files int    // files in the zip
	h1    string // the go.sum hash of the zip
	modH1 string // the go.sum hash of the .mod file
}

// buildProxy writes to out a file-system module proxy (GOPROXY=file://out)
// serving every module of ws at version, made from the working tree: for
// each module, <path>/@v/list, version.info, version.mod (its go.mod, as
// is) and version.zip. The zip holds the module's files as a commit of the
// working tree would (git-ignored files are left out), without nested
// modules, and the root LICENSE when the module has none, as the go command
// builds it from a tag. Sibling replace lines stay in the go.mod: a module
// that is not the main module has its replace lines ignored, so a consumer
// resolves the siblings through the proxy all the same.
func buildProxy(ws *workspace, out, version string) ([]proxied, error) {
	files, err := ws.sourceFiles()
	if err != nil {
		return nil, err
	}
	var license []byte
	if slices.Contains(files, "LICENSE") {
		if license, err = os.ReadFile(filepath.Join(ws.root, "LICENSE")); err != nil {
			return nil, err
		}
	}
	stage, err := os.MkdirTemp("", "simba-release-stage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)

	info, err := json.Marshal(struct {
		Version string
		Time    string
	}{version, time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return nil, err
	}
	var done []proxied
	for i, m := range ws.modules {
		src := moduleFiles(m, files)
		if !slices.Contains(src, "go.mod") {
			return nil, fmt.Errorf("%s/go.mod is ignored by git: it would not be released", m.dir)
		}
		dir := filepath.Join(stage, fmt.Sprint(i))
		if err := copyFiles(filepath.Join(ws.root, filepath.FromSlash(m.dir)), dir, src); err != nil {
			return nil, err
		}
		if license != nil && !slices.Contains(src, "LICENSE") {
			if err := os.WriteFile(filepath.Join(dir, "LICENSE"), license, 0o644); err != nil {
				return nil, err
			}
			src = append(src, "LICENSE")
		}
		p, err := writeProxyModule(out, m, version, dir, info)
		if err != nil {
			return nil, err
		}
		p.files = len(src)
		done = append(done, p)
	}
	return done, nil
}

// writeProxyModule writes the list, info, mod and zip files of m at version
// from the staged copy of its files in dir.
func writeProxyModule(out string, m *gomod, version, dir string, info []byte) (proxied, error) {
	escaped, err := module.EscapePath(m.path)
	if err != nil {
		return proxied{}, err
	}
	vdir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return proxied{}, err
	}
	ev, err := module.EscapeVersion(version)
	if err != nil {
		return proxied{}, err
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return proxied{}, err
	}
	if err := os.WriteFile(filepath.Join(vdir, ev+".mod"), mod, 0o644); err != nil {
		return proxied{}, err
	}
	if err := os.WriteFile(filepath.Join(vdir, ev+".info"), info, 0o644); err != nil {
		return proxied{}, err
	}
	zipName := filepath.Join(vdir, ev+".zip")
	zf, err := os.Create(zipName)
	if err != nil {
		return proxied{}, err
	}
	mv := module.Version{Path: m.path, Version: version}
	err = modzip.CreateFromDir(zf, mv, dir)
	if cerr := zf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return proxied{}, fmt.Errorf("zip of %s: %w", m.dir, err)
	}
	if err := addToList(filepath.Join(vdir, "list"), version); err != nil {
		return proxied{}, err
	}
	h1, err := dirhash.HashZip(zipName, dirhash.Hash1)
	if err != nil {
		return proxied{}, err
	}
	modH1, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(string(mod))), nil
	})
	if err != nil {
		return proxied{}, err
	}
	return proxied{mod: m, h1: h1, modH1: modH1}, nil
}

// addToList adds version to the list file of a module, kept sorted.
func addToList(name, version string) error {
	data, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(data))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(name, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// copyFiles copies the files named by rel (slash-separated, relative to
// from) into to.
func copyFiles(from, to string, rel []string) error {
	for _, r := range rel {
		dst := filepath.Join(to, filepath.FromSlash(r))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyFile(filepath.Join(from, filepath.FromSlash(r)), dst); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// runProxy is "release proxy".
func runProxy(_ context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("proxy", errOut)
	dir := fs.String("out", "", "the directory to write the proxy to (created if missing)")
	version := fs.String("version", "", "the version of the modules (default: the version the go.mod files require their siblings at)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *dir == "" {
		fmt.Fprintln(errOut, "release proxy: -out is required")
		return errUsage
	}
	ws, v, err := loadWorkspaceAt(*version)
	if err != nil {
		return err
	}
	if err := ws.checkRequiredAt(v); err != nil {
		return err
	}
	outDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	start := time.Now()
	ps, err := buildProxy(ws, outDir, v)
	if err != nil {
		return err
	}
	for _, p := range ps {
		fmt.Fprintf(out, "%s@%s\t%d files\t%s\n", p.mod.path, v, p.files, p.h1)
	}
	fmt.Fprintf(out, "proxy of %d modules at %s in %s: GOPROXY=file://%s\n", len(ps), v, since(start), filepath.ToSlash(outDir))
	return nil
}

// checkRequiredAt fails when a go.mod requires a sibling at another version
// than v: a proxy at v could not serve that requirement.
func (ws *workspace) checkRequiredAt(v string) error {
	var wrong []string
	for _, m := range ws.modules {
		for _, r := range ws.siblingRequires(m) {
			if r.Mod.Version != v {
				wrong = append(wrong, fmt.Sprintf("%s/go.mod requires %s %s", m.dir, r.Mod.Path, r.Mod.Version))
			}
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("the modules are to be served at %s, but:\n  %s\nrun release -version %s first", v, strings.Join(wrong, "\n  "), v)
	}
	return nil
}

// since returns the time since start, rounded for printing.
func since(start time.Time) time.Duration {
	return time.Since(start).Round(100 * time.Millisecond)
}
