package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
)

// runVersions is "release versions".
func runVersions(_ context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlagSet("versions", errOut)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	ws, err := loadWorkspace()
	if err != nil {
		return err
	}
	return versionsCheck(ws, out)
}

// versionsCheck checks the versions the documents name and prints one
// line for each claim that is wrong, then a summary.
func versionsCheck(ws *workspace, out io.Writer) error {
	r, err := checkVersionClaims(ws)
	if err != nil {
		return err
	}
	for _, p := range r.problems {
		fmt.Fprintln(out, "FAIL "+p)
	}
	if len(r.problems) > 0 {
		return fmt.Errorf("versions: %d of %d version claims in %d documents disagree with the go.mod files and the Makefile",
			len(r.problems), r.claims, r.docs)
	}
	fmt.Fprintf(out, "ok   versions: %d version claims in %d documents agree with the go.mod files and the Makefile\n", r.claims, r.docs)
	return nil
}

// claimReport is what checkVersionClaims found.
type claimReport struct {
	docs, claims int
	problems     []string // "doc:line: what is wrong"
}

// dependencyNames maps the names the documents give dependencies to their
// module paths, longest name first where one name starts another.
var dependencyNames = []struct{ name, path string }{
	{"go-redis", modRedis},
	{"pgx", modPgx},
	{"go-sql-driver/mysql", modMySQL},
	{"go-zookeeper/zk", modZooKeeper},
	{"go-zookeeper", modZooKeeper},
	{"uber-go/fx", modFx},
	{"client_golang", modProm},
	{"godog", "github.com/cucumber/godog"},
	{"redislock", "github.com/bsm/redislock"},
	{"redsync", "github.com/go-redsync/redsync/v4"},
}

// toolVersions maps the tools the documents name to the Makefile variable
// that pins their version.
var toolVersions = map[string]string{
	"golangci-lint": "GOLANGCI_LINT_VERSION",
	"actionlint":    "ACTIONLINT_VERSION",
	"govulncheck":   "GOVULNCHECK_VERSION",
}

var (
	// goClaim is a Go release a document names: "Go 1.25", "Go 1.25+",
	// "`go 1.25.0`" (a go line).
	goClaim = regexp.MustCompile("\\bGo (1\\.\\d+)(?:\\.\\d+)?\\b|`go (1\\.\\d+)\\.\\d+`")
	// buildsWith is the claim of the oldest Go a user can build with.
	buildsWith = regexp.MustCompile(`\b[Bb]uilds?\s+with\s+Go\s+(1\.\d+)\b`)
	// versionClaim is a dependency or a tool followed by a version: "go-redis v9.22.0", "pgx v5".
	versionClaim = regexp.MustCompile(`(?:^|[^\w/.-])(` + claimNames() + `)(?:/v\d+)? (v\d+(?:\.\d+){0,2})\b`)
)

func claimNames() string {
	var names []string
	for _, d := range dependencyNames {
		names = append(names, regexp.QuoteMeta(d.name))
	}
	for t := range toolVersions {
		names = append(names, regexp.QuoteMeta(t))
	}
	// Longest first, so that go-zookeeper/zk wins over go-zookeeper.
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	return strings.Join(names, "|")
}

// checkVersionClaims reads every Markdown document of the repository but
// the CHANGELOG and the ADRs (records of their time) and checks the
// versions it names:
//
//   - a Go release ("Go 1.25", "`go 1.25.0`") in a document inside a module
//     is the go line of that module or of a module below it; elsewhere it
//     is the go line of some module or of go.work;
//   - outside the modules, "builds with Go 1.N" names the oldest supported
//     Go: the language version of GO_MIN_TOOLCHAIN in the Makefile, which
//     every module of MIN_GO_MODULES must say in its go line;
//   - a dependency's version ("go-redis v9.22.0", "pgx v5") is a prefix of
//     the version the module's go.mod requires, which is what `go get`
//     resolves for a new user of the module (go.mod lists every module of
//     the build since Go 1.17); outside the modules, of the version every
//     module of MIN_GO_MODULES that requires it requires;
//   - a tool's version ("golangci-lint v2") is a prefix of the Makefile's;
//   - the module table of CONTRIBUTING.md has a row per module of go.work
//     with its go line;
//   - the top README and the simba command's page give the go install line
//     of the command (checkInstallLine).
func checkVersionClaims(ws *workspace) (*claimReport, error) {
	vars, err := readMakeVars(filepath.Join(ws.root, "Makefile"))
	if err != nil {
		return nil, err
	}
	r := &claimReport{}
	minLang, ok := languageVersion(vars["GO_MIN_TOOLCHAIN"])
	if !ok {
		return nil, fmt.Errorf("the Makefile's GO_MIN_TOOLCHAIN %q is not a Go release such as go1.25.14", vars["GO_MIN_TOOLCHAIN"])
	}
	var minMods []*gomod
	for _, dir := range strings.Fields(vars["MIN_GO_MODULES"]) {
		m := ws.module(dir)
		if m == nil {
			return nil, fmt.Errorf("the Makefile's MIN_GO_MODULES names %s, which is not a module of go.work", dir)
		}
		if got := goLine(m); got != minLang {
			r.problems = append(r.problems, fmt.Sprintf("%s/go.mod says go %s: the Makefile's GO_MIN_TOOLCHAIN %s wants go %s for the modules users build",
				m.dir, got, vars["GO_MIN_TOOLCHAIN"], minLang))
		}
		minMods = append(minMods, m)
	}
	if len(minMods) == 0 {
		return nil, errors.New("the Makefile's MIN_GO_MODULES names no module")
	}

	docs, err := listDocs(ws.root)
	if err != nil {
		return nil, err
	}
	if err := checkInstallLine(ws, r); err != nil {
		return nil, err
	}
	for _, doc := range docs {
		data, err := os.ReadFile(filepath.Join(ws.root, filepath.FromSlash(doc)))
		if err != nil {
			return nil, err
		}
		r.docs++
		c := &docChecker{ws: ws, r: r, doc: doc, text: string(data), vars: vars, minLang: minLang, minMods: minMods}
		c.scope = ws.enclosingModules(path.Dir(doc))
		c.check()
		if doc == "CONTRIBUTING.md" {
			c.checkModuleTable()
		}
	}
	return r, nil
}

// docChecker checks the claims of one document.
type docChecker struct {
	ws      *workspace
	r       *claimReport
	doc     string // slash-separated, relative to the root
	text    string
	vars    map[string]string
	minLang string
	minMods []*gomod
	scope   []*gomod // the module holding the document and the modules below it; nil at the top
}

func (c *docChecker) problem(offset int, format string, args ...any) {
	line := 1 + strings.Count(c.text[:offset], "\n")
	c.r.problems = append(c.r.problems, fmt.Sprintf("%s:%d: %s", c.doc, line, fmt.Sprintf(format, args...)))
}

func (c *docChecker) check() {
	for _, m := range goClaim.FindAllStringSubmatchIndex(c.text, -1) {
		c.r.claims++
		lo, hi := m[2], m[3]
		if lo < 0 {
			lo, hi = m[4], m[5]
		}
		c.checkGo(m[0], c.text[lo:hi], c.text[m[0]:m[1]])
	}
	if c.scope == nil {
		for _, m := range buildsWith.FindAllStringSubmatchIndex(c.text, -1) {
			c.r.claims++
			if got := c.text[m[2]:m[3]]; got+".0" != c.minLang {
				c.problem(m[0], "%q: the oldest Go the modules users build support is %s (GO_MIN_TOOLCHAIN %s in the Makefile)",
					c.text[m[0]:m[1]], majorMinor(c.minLang), c.vars["GO_MIN_TOOLCHAIN"])
			}
		}
	}
	for _, m := range versionClaim.FindAllStringSubmatchIndex(c.text, -1) {
		c.r.claims++
		c.checkVersion(m[2], c.text[m[2]:m[3]], c.text[m[4]:m[5]])
	}
}

// checkGo checks one Go release the document names.
func (c *docChecker) checkGo(offset int, release, claim string) {
	allowed := map[string][]string{} // major.minor to the go.mod files (or go.work) that say it
	if c.scope != nil {
		for _, m := range c.scope {
			allowed[majorMinor(goLine(m))] = append(allowed[majorMinor(goLine(m))], m.dir+"/go.mod")
		}
	} else {
		for _, m := range c.ws.modules {
			allowed[majorMinor(goLine(m))] = append(allowed[majorMinor(goLine(m))], m.dir+"/go.mod")
		}
		allowed[majorMinor(c.ws.goWork)] = append(allowed[majorMinor(c.ws.goWork)], "go.work")
	}
	if _, ok := allowed[release]; ok {
		return
	}
	var says []string
	for v, files := range allowed {
		verb := "says"
		if len(files) > 1 {
			verb = "say"
		}
		says = append(says, fmt.Sprintf("%s %s go %s", strings.Join(files, " and "), verb, v))
	}
	slices.Sort(says)
	c.problem(offset, "%q, but %s", claim, strings.Join(says, "; "))
}

// checkVersion checks the version the document gives a dependency or a tool.
func (c *docChecker) checkVersion(offset int, name, claimed string) {
	if v, ok := toolVersions[name]; ok {
		if !versionPrefix(claimed, c.vars[v]) {
			c.problem(offset, "%s %s, but the Makefile pins %s %s (%s)", name, claimed, name, c.vars[v], v)
		}
		return
	}
	var modPath string
	for _, d := range dependencyNames {
		if d.name == name {
			modPath = d.path
		}
	}
	mods := c.scope
	if mods == nil {
		mods = c.minMods
	}
	req := requirements(mods, modPath)
	if len(req) == 0 && c.scope == nil {
		req = requirements(c.ws.modules, modPath)
	}
	if len(req) == 0 {
		c.problem(offset, "%s %s, but no go.mod %s requires %s", name, claimed, scopeName(c.scope), modPath)
		return
	}
	var wrong []string
	for _, q := range req {
		if !versionPrefix(claimed, q.version) {
			wrong = append(wrong, fmt.Sprintf("%s/go.mod requires %s", q.dir, q.version))
		}
	}
	if len(wrong) > 0 {
		c.problem(offset, "%s %s, but %s (what go get resolves)", name, claimed, strings.Join(wrong, ", "))
	}
}

// moduleRow is a row of the module table of CONTRIBUTING.md:
// | `dir` | `module` | go line | what |.
var moduleRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]+)` \\| ([0-9.]+) \\|")

// checkModuleTable checks that the module table of CONTRIBUTING.md has a
// row for every module of go.work, with its path and its go line.
func (c *docChecker) checkModuleTable() {
	seen := map[string]bool{}
	rows := moduleRow.FindAllStringSubmatchIndex(c.text, -1)
	if len(rows) == 0 {
		c.problem(0, "no module table (| `dir` | `module` | go line | what |)")
		return
	}
	for _, m := range rows {
		c.r.claims++
		dir, modPath, line := c.text[m[2]:m[3]], c.text[m[4]:m[5]], c.text[m[6]:m[7]]
		mod := c.ws.module(dir)
		if mod == nil {
			c.problem(m[0], "the module table names %s, which is not a module of go.work", dir)
			continue
		}
		seen[dir] = true
		if tail, short := strings.CutPrefix(modPath, "..."); short && !strings.HasSuffix(mod.path, tail) || !short && modPath != mod.path {
			c.problem(m[0], "the module table gives %s the path %s, but its go.mod says %s", dir, modPath, mod.path)
		}
		if line != goLine(mod) {
			c.problem(m[0], "the module table gives %s the go line %s, but %s/go.mod says go %s", dir, line, dir, goLine(mod))
		}
	}
	for _, m := range c.ws.modules {
		if !seen[m.dir] {
			c.problem(rows[0][0], "the module table has no row for the module %s", m.dir)
		}
	}
}

// installDocs are the documents that show how to install the simba command.
var installDocs = []string{"README.md", commandPkg + "/README.md"}

// checkInstallLine checks that the documents of installDocs give the
// go install line that the go-get check proves, with the module path of
// the command's package.
func checkInstallLine(ws *workspace, r *claimReport) error {
	m := ws.module(commandModule)
	if m == nil {
		return fmt.Errorf("%s is not a module of go.work", commandModule)
	}
	line := "go install " + m.path + strings.TrimPrefix(commandPkg, commandModule) + "@latest"
	for _, doc := range installDocs {
		data, err := os.ReadFile(filepath.Join(ws.root, filepath.FromSlash(doc)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		r.claims++
		if !strings.Contains(string(data), line) {
			r.problems = append(r.problems, fmt.Sprintf("%s: no %q, the install that make goget-check proves", doc, line))
		}
	}
	return nil
}

// enclosingModules returns the module whose directory holds dir (the
// nearest) and the modules below that one, or nil when no module holds dir.
func (ws *workspace) enclosingModules(dir string) []*gomod {
	var holder *gomod
	for _, m := range ws.modules {
		if (dir == m.dir || strings.HasPrefix(dir, m.dir+"/")) && (holder == nil || len(m.dir) > len(holder.dir)) {
			holder = m
		}
	}
	if holder == nil {
		return nil
	}
	mods := []*gomod{holder}
	for _, m := range ws.modules {
		if strings.HasPrefix(m.dir, holder.dir+"/") {
			mods = append(mods, m)
		}
	}
	return mods
}

type requirement struct{ dir, version string }

// requirements returns the version each module of mods requires modPath at.
func requirements(mods []*gomod, modPath string) []requirement {
	var out []requirement
	for _, m := range mods {
		for _, r := range m.file.Require {
			if r.Mod.Path == modPath {
				out = append(out, requirement{m.dir, r.Mod.Version})
			}
		}
	}
	return out
}

func scopeName(scope []*gomod) string {
	if scope == nil {
		return "of the workspace"
	}
	return "in " + scope[0].dir
}

// versionPrefix reports whether claimed ("v9", "v9.22", "v9.22.0") names
// version or a series that holds it.
func versionPrefix(claimed, version string) bool {
	c, v := strings.Split(claimed, "."), strings.Split(version, ".")
	return semver.IsValid(version) && len(c) <= len(v) && slices.Equal(c, v[:len(c)])
}

// goLine returns the version of m's go line, "" without one.
func goLine(m *gomod) string {
	if m.file.Go == nil {
		return ""
	}
	return m.file.Go.Version
}

// majorMinor returns "1.25" for "1.25.0".
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// readMakeVars returns the variables a Makefile sets with "NAME ?= value"
// or "NAME := value" at the start of a line.
func readMakeVars(name string) (map[string]string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	assign := regexp.MustCompile(`^([A-Z][A-Z0-9_]*)\s*[?:]?=\s*(.*)$`)
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if m := assign.FindStringSubmatch(sc.Text()); m != nil {
			vars[m[1]] = strings.TrimSpace(m[2])
		}
	}
	return vars, sc.Err()
}

// listDocs returns the Markdown documents of the repository, relative to
// root and slash-separated, but CHANGELOG.md and the ADRs, leaving out
// hidden directories, Python virtual environments and build output.
func listDocs(root string) ([]string, error) {
	var docs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "__pycache__" ||
				name == "bin" || name == "build" || rel == "docs/adr") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "pyvenv.cfg")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".md") && rel != "CHANGELOG.md" {
			docs = append(docs, rel)
		}
		return nil
	})
	return docs, err
}
