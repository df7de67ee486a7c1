package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// goBin is the go command the checks run: $GO when set (the Makefile sets
// it), else go from PATH.
func goBin() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// withEnv returns base with each "KEY=value" of kv set, replacing any
// earlier value of KEY.
func withEnv(base []string, kv ...string) []string {
	keys := map[string]bool{}
	for _, e := range kv {
		k, _, _ := strings.Cut(e, "=")
		keys[k] = true
	}
	env := make([]string, 0, len(base)+len(kv))
	for _, e := range base {
		if k, _, _ := strings.Cut(e, "="); !keys[k] {
			env = append(env, e)
		}
	}
	return append(env, kv...)
}

// runIn runs name with args in dir with env (nil: the process's) and
// returns its standard output. What it prints on its standard error, such
// as the go command's "go: downloading ..." lines on a machine with empty
// caches, is not part of it; the error carries both.
func runIn(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &cmdError{cmd: strings.Join(append([]string{filepath.Base(name)}, args...), " "), dir: dir, err: err, out: stderr.String() + stdout.String()}
	}
	return stdout.String(), nil
}

// runGo runs the go command with args in dir with env.
func runGo(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	return runIn(ctx, dir, env, goBin(), args...)
}

// goVersion returns the release that the go command runs in dir with env,
// as "go env GOVERSION" prints it. The first time a toolchain named by
// GOTOOLCHAIN is fetched, go says "go: downloading go1.25.14
// (linux/amd64)" on its standard error, which is not part of it.
func goVersion(ctx context.Context, dir string, env []string) (string, error) {
	out, err := runGo(ctx, dir, env, "env", "GOVERSION")
	return strings.TrimSpace(out), err
}

// cmdError is a command that failed, with what it printed.
type cmdError struct {
	cmd, dir string
	err      error
	out      string
}

func (e *cmdError) Error() string {
	out := strings.TrimRight(e.out, "\n")
	if out != "" {
		out = "\n" + indent(out)
	}
	return fmt.Sprintf("%s (in %s): %v%s", e.cmd, e.dir, e.err, out)
}

func (e *cmdError) Unwrap() error { return e.err }

// indent prefixes every line of s with four spaces.
func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// proxyEnv is the environment of a go command that works outside the
// workspace (go.work off) and resolves the modules of ws through the
// file-system proxy at proxyDir. Other modules come from the download cache
// of the shared module cache (itself a valid file-system proxy of what the
// workspace fetched), else from the configured GOPROXY: with a filled cache
// no network is used. The module cache is modCache, a fresh one, so that
// unreleased versions of the siblings never enter the shared cache, and no
// toolchain is downloaded.
//
// With checkSums, the siblings are left out of the checksum database (they
// are not published) and every other module new to a go.sum is checked
// against it, as usual; without, the checksum database is off, for builds
// that are thrown away.
func proxyEnv(ctx context.Context, ws *workspace, proxyDir, modCache string, checkSums bool) ([]string, error) {
	shared, err := goEnv(ctx, "GOMODCACHE")
	if err != nil {
		return nil, err
	}
	upstream, err := goEnv(ctx, "GOPROXY")
	if err != nil {
		return nil, err
	}
	sums := []string{"GOSUMDB=off", "GONOSUMDB="}
	if checkSums {
		var paths []string
		for _, m := range ws.modules {
			paths = append(paths, m.path)
		}
		if private, err := goEnv(ctx, "GONOSUMDB"); err == nil && private != "" {
			paths = append(paths, private)
		}
		sums = []string{"GONOSUMDB=" + strings.Join(paths, ",")}
	}
	gp := fileURL(proxyDir) + "," + fileURL(filepath.Join(shared, "cache", "download"))
	if upstream != "" {
		gp += "," + upstream
	}
	return withEnv(os.Environ(), append([]string{
		"GOWORK=off",
		"GOPROXY=" + gp,
		"GONOPROXY=",
		"GOPRIVATE=",
		"GOMODCACHE=" + modCache,
		// -trimpath keeps the module cache's path out of the build cache
		// keys, so that a fresh module cache still reuses earlier builds.
		"GOFLAGS=-mod=mod -modcacherw -trimpath",
		"GOTOOLCHAIN=local",
	}, sums...)...), nil
}

// fileURL returns the file:// URL of the absolute path p.
func fileURL(p string) string {
	p = filepath.ToSlash(p)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter
	}
	return "file://" + p
}

// goEnv returns the value of one go env variable.
func goEnv(ctx context.Context, key string) (string, error) {
	out, err := runGo(ctx, "", nil, "env", key)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}
