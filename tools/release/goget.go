package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Module paths of the drivers the go-get check looks for in binaries.
const (
	modRedis     = "github.com/redis/go-redis/v9"
	modPgx       = "github.com/jackc/pgx/v5"
	modMySQL     = "github.com/go-sql-driver/mysql"
	modEdwards   = "filippo.io/edwards25519"
	modZooKeeper = "github.com/go-zookeeper/zk"
	modFx        = "go.uber.org/fx"
	modProm      = "github.com/prometheus/client_golang"
)

// program is a program of testdata/goget, built against one module of the
// workspace fetched with go get.
type program struct {
	name    string   // directory under testdata/goget
	get     string   // the module directory to go get, like "backend-redis"
	needPkg string   // the package directory the program imports; when it holds no package, the proof is skipped
	want    []string // modules the binary must link
	deny    []string // modules the binary must not link
}

// programs are the go-get proofs, one per module users import; see
// testdata/goget/README.md.
var programs = []program{
	{name: "redis", get: "backend-redis", want: []string{modRedis}, deny: []string{modPgx, modMySQL, modZooKeeper}},
	{name: "zk", get: "backend-zk", want: []string{modZooKeeper}, deny: []string{modRedis, modPgx, modMySQL}},
	{
		name: "postgres", get: "backend-jdbc", needPkg: "backend-jdbc/postgres",
		want: []string{modPgx}, deny: []string{modMySQL, modEdwards, modRedis, modZooKeeper},
	},
	{
		name: "mysql", get: "backend-jdbc", needPkg: "backend-jdbc/mysql",
		want: []string{modMySQL}, deny: []string{modPgx, modRedis, modZooKeeper},
	},
	{name: "fxsimba", get: "fxsimba", want: []string{modFx}, deny: []string{modRedis, modPgx, modMySQL, modZooKeeper}},
	{name: "metrics", get: "metrics", want: []string{modProm}, deny: []string{modRedis, modPgx, modMySQL, modZooKeeper, modFx}},
}

// commandModule and commandPkg name what users go install.
const (
	commandModule = "tools"
	commandPkg    = "tools/cmd/simba"
)

// runGoget is "release goget".
func runGoget(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("goget", errOut)
	version := fs.String("version", "", "the version to serve and get (default: the version the go.mod files require their siblings at)")
	keep := fs.Bool("keep", false, "keep the temporary directory and print its path")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	ws, v, err := loadWorkspaceAt(*version)
	if err != nil {
		return err
	}
	return gogetCheck(ctx, ws, v, *keep, out)
}

// gogetCheck proves that users can go get the modules at version: it serves
// the working tree from a file-system proxy and, outside the workspace,
// builds a program per module from testdata/goget and installs the simba
// command. It prints one line per proof.
func gogetCheck(ctx context.Context, ws *workspace, version string, keep bool, out io.Writer) (err error) {
	start := time.Now()
	if err := ws.checkRequiredAt(version); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "simba-goget-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(out, "goget: keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	proxyDir := filepath.Join(tmp, "proxy")
	ps, err := buildProxy(ws, proxyDir, version)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "goget: proxy of %d modules at %s from the working tree in %s\n", len(ps), version, since(start))
	env, err := proxyEnv(ctx, ws, proxyDir, filepath.Join(tmp, "modcache"), false)
	if err != nil {
		return err
	}
	gobin := filepath.Join(tmp, "bin")
	env = withEnv(env, "GOBIN="+gobin)

	testdata := filepath.Join(ws.root, "tools", "release", "testdata", "goget")
	var failed []string
	passed, skipped := 0, 0
	for _, p := range programs {
		m := ws.module(p.get)
		if m == nil {
			return fmt.Errorf("program %s: %s is not a module of go.work", p.name, p.get)
		}
		if p.needPkg != "" && !hasGoPackage(filepath.Join(ws.root, filepath.FromSlash(p.needPkg))) {
			fmt.Fprintf(out, "skipped: %s does not exist\n", p.needPkg)
			skipped++
			continue
		}
		line, err := proveProgram(ctx, p, m.path+"@"+version, filepath.Join(testdata, p.name), filepath.Join(tmp, "prog", p.name), env)
		if err != nil {
			fmt.Fprintf(out, "FAIL %s: %v\n", p.name, err)
			failed = append(failed, p.name)
			continue
		}
		fmt.Fprintln(out, "ok   "+line)
		passed++
	}

	line, err := proveInstall(ctx, ws, version, tmp, gobin, env)
	if err != nil {
		fmt.Fprintf(out, "FAIL go install: %v\n", err)
		failed = append(failed, "go install")
	} else {
		fmt.Fprintln(out, "ok   "+line)
		passed++
	}
	fmt.Fprintf(out, "goget: %d passed, %d failed, %d skipped in %s\n", passed, len(failed), skipped, since(start))
	if len(failed) > 0 {
		return fmt.Errorf("go-get check failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// proveProgram copies the program in src to a fresh module in dir, runs
// go get target (module@version) alone, builds the program and checks the
// modules linked into the binary.
func proveProgram(ctx context.Context, p program, target, src, dir string, env []string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no Go file in %s", src)
	}
	if err := copyFiles(src, dir, names); err != nil {
		return "", err
	}
	if _, err := runGo(ctx, dir, env, "mod", "init", "example.com/goget/"+p.name); err != nil {
		return "", err
	}
	if _, err := runGo(ctx, dir, env, "get", target); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, p.name)
	if _, err := runGo(ctx, dir, env, "build", "-o", bin, "."); err != nil {
		return "", err
	}
	deps, err := linkedModules(ctx, bin, env)
	if err != nil {
		return "", err
	}
	mod, version, _ := strings.Cut(target, "@")
	if err := checkLinked(deps, mod, version, p.want, p.deny); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: go get %s alone, build: %d modules linked; drivers: %s; none of %s",
		p.name, target, len(deps), linkedDrivers(deps), strings.Join(short(p.deny), ", ")), nil
}

// drivers are the modules a program may link to reach a server.
var drivers = []string{modRedis, modPgx, modMySQL, modZooKeeper}

// linkedDrivers lists the drivers among deps with their versions.
func linkedDrivers(deps map[string]string) string {
	var found []string
	for _, d := range drivers {
		if v, ok := deps[d]; ok {
			found = append(found, short([]string{d})[0]+" "+v)
		}
	}
	if len(found) == 0 {
		return "none"
	}
	return strings.Join(found, ", ")
}

// checkLinked checks the modules deps (path to version, as linkedModules
// returns them) of a binary built after go get mod@version: mod is linked at
// version from the proxy, not replaced, every module of want is linked and
// no module of deny.
func checkLinked(deps map[string]string, mod, version string, want, deny []string) error {
	if got, ok := deps[mod]; !ok {
		return fmt.Errorf("%s is not linked", mod)
	} else if got != version {
		return fmt.Errorf("%s is linked at %s, want %s", mod, got, version)
	}
	for path, v := range deps {
		if strings.Contains(v, "=>") {
			return fmt.Errorf("%s is replaced (%s): a consumer's build has no replace", path, v)
		}
	}
	var missing, linked []string
	for _, w := range want {
		if _, ok := deps[w]; !ok {
			missing = append(missing, w)
		}
	}
	for _, d := range deny {
		if v, ok := deps[d]; ok {
			linked = append(linked, d+" "+v)
		}
	}
	switch {
	case len(linked) > 0:
		return fmt.Errorf("links %s", strings.Join(linked, ", "))
	case len(missing) > 0:
		return fmt.Errorf("does not link %s", strings.Join(missing, ", "))
	}
	return nil
}

// linkedModules returns the dependency modules recorded in the binary bin,
// as `go version -m` prints them: path to version, with " => path version"
// appended for a replaced module.
func linkedModules(ctx context.Context, bin string, env []string) (map[string]string, error) {
	out, err := runGo(ctx, filepath.Dir(bin), env, "version", "-m", bin)
	if err != nil {
		return nil, err
	}
	return parseVersionM(out), nil
}

// parseVersionM parses the output of go version -m.
func parseVersionM(out string) map[string]string {
	deps := map[string]string{}
	last := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[0] == "dep":
			deps[f[1]] = f[2]
			last = f[1]
		case len(f) >= 3 && f[0] == "=>" && last != "":
			deps[last] += " => " + f[1] + " " + f[2]
		}
	}
	return deps
}

// proveInstall runs go install on the simba command at version, outside any
// module, and runs "simba version".
func proveInstall(ctx context.Context, ws *workspace, version, tmp, gobin string, env []string) (string, error) {
	m := ws.module(commandModule)
	if m == nil {
		return "", fmt.Errorf("%s is not a module of go.work", commandModule)
	}
	pkg := m.path + strings.TrimPrefix(commandPkg, commandModule)
	target := pkg + "@" + version
	if _, err := runGo(ctx, tmp, env, "install", target); err != nil {
		return "", err
	}
	bin := filepath.Join(gobin, "simba")
	got, err := runIn(ctx, tmp, env, bin, "version")
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(strings.TrimSpace(got), "\n")
	if !strings.HasPrefix(first, "simba "+version+" ") {
		return "", fmt.Errorf("simba version printed %q, want it to start with %q", first, "simba "+version)
	}
	return fmt.Sprintf("go install %s: %q", target, first), nil
}

// hasGoPackage reports whether dir holds a non-test Go file.
func hasGoPackage(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}

// short returns the module paths without their host, for printing.
func short(paths []string) []string {
	s := make([]string, len(paths))
	for i, p := range paths {
		if _, rest, ok := strings.Cut(p, "/"); ok && strings.Contains(p, ".") {
			s[i] = rest
		} else {
			s[i] = p
		}
	}
	return s
}
