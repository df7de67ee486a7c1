package features

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// rulesCatalog is the rules catalog, relative to the repository root.
const rulesCatalog = "docs/rules.md"

// TestRulesCatalog checks docs/rules.md against the repository: every rule
// id a scenario is tagged with, or a document or source file cites, has an
// entry; every entry lists exactly the scenarios tagged with its rule (at
// least one), each in the file it names; and every other test an entry
// names is declared in the file it names.
func TestRulesCatalog(t *testing.T) {
	problems, err := checkRulesCatalog(os.DirFS(".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestRulesCatalogCatchesDrift runs the check on small trees, so that it is
// known to fail when the catalog and the tags disagree.
func TestRulesCatalogCatchesDrift(t *testing.T) {
	// The ids are built here, so that the check of the repository does
	// not find them in this file.
	known, unknown := "R-"+"ZZ-1", "R-"+"ZZ-2"
	feature := "Feature: Z\n\n  @" + known + "\n  Scenario: One\n    Given x\n\n" +
		"  @" + unknown + "\n  Scenario: Two\n    Given x\n"
	catalog := "# Rules\n\n### " + known + "\n\nWords.\n\n- features/z.feature: One\n- core/z_test.go: TestZ\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string // in the problems, one each
	}{
		{
			name:  "a tag without an entry",
			files: map[string]string{"features/z.feature": feature, rulesCatalog: catalog, "core/z_test.go": "func TestZ(t *testing.T) {}\n"},
			want:  []string{unknown + " is used (features/z.feature: Two) but has no entry"},
		},
		{
			name: "a citation without an entry",
			files: map[string]string{"features/z.feature": strings.Replace(feature, "@"+unknown, "", 1), rulesCatalog: catalog,
				"core/z_test.go": "// " + unknown + "..3: cited\nfunc TestZ(t *testing.T) {}\n"},
			want: []string{unknown + " is used (core/z_test.go) but has no entry", "R-" + "ZZ-3 is used (core/z_test.go)"},
		},
		{
			name: "a scenario listed that is not tagged",
			files: map[string]string{"features/z.feature": strings.Replace(feature, "@"+known, "", 1), rulesCatalog: catalog,
				"core/z_test.go": "func TestZ(t *testing.T) {}\n"},
			want: []string{"features/z.feature: One is not tagged @" + known},
		},
		{
			name: "a tagged scenario not listed",
			files: map[string]string{"features/z.feature": strings.Replace(feature, unknown, known, 1), rulesCatalog: catalog,
				"core/z_test.go": "func TestZ(t *testing.T) {}\n"},
			want: []string{known + " does not list features/z.feature: Two"},
		},
		{
			name: "an entry without a scenario",
			files: map[string]string{"features/z.feature": "Feature: Z\n",
				rulesCatalog:     strings.Replace(catalog, "- features/z.feature: One\n", "", 1),
				"core/z_test.go": "// " + known + "\nfunc TestZ(t *testing.T) {}\n"},
			want: []string{known + " names no scenario"},
		},
		{
			name: "a scenario that does not exist",
			files: map[string]string{"features/z.feature": "Feature: Z\n", rulesCatalog: catalog,
				"core/z_test.go": "// " + known + "\nfunc TestZ(t *testing.T) {}\n"},
			want: []string{"features/z.feature: One, which does not exist"},
		},
		{
			name: "a test that does not exist",
			files: map[string]string{"features/z.feature": strings.Replace(feature, "@"+unknown, "", 1), rulesCatalog: catalog,
				"core/z_test.go": "func TestY(t *testing.T) {}\n"},
			want: []string{"core/z_test.go declares no TestZ"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := fstest.MapFS{}
			for name, text := range tc.files {
				tree[name] = &fstest.MapFile{Data: []byte(text)}
			}
			problems, err := checkRulesCatalog(tree)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
					t.Errorf("no problem says %q; got %q", w, problems)
				}
			}
		})
	}
	tree := fstest.MapFS{
		"features/z.feature": {Data: []byte(strings.Replace(feature, "@"+unknown, "", 1))},
		rulesCatalog:         {Data: []byte(catalog)},
		"core/z_test.go":     {Data: []byte("func TestZ(t *testing.T) {}\n")},
	}
	if problems, err := checkRulesCatalog(tree); err != nil || len(problems) > 0 {
		t.Fatalf("a catalog in step with its tree: %q, %v", problems, err)
	}
}

// ruleID matches a rule id, or a range of them (R-CFG-2..4).
var ruleID = regexp.MustCompile(`R-([A-Z]+)-([0-9]+)(?:\.\.([0-9]+))?`)

// ruleIDs returns the ids s mentions, ranges expanded.
func ruleIDs(s string) []string {
	var ids []string
	for _, m := range ruleID.FindAllStringSubmatch(s, -1) {
		from, _ := strconv.Atoi(m[2])
		to := from
		if m[3] != "" {
			to, _ = strconv.Atoi(m[3])
		}
		for n := from; n <= to && n < from+20; n++ {
			ids = append(ids, fmt.Sprintf("R-%s-%d", m[1], n))
		}
	}
	return ids
}

// scenarioRef is a scenario of a feature file, or a test of a source file.
type scenarioRef struct{ file, name string }

func (r scenarioRef) String() string { return r.file + ": " + r.name }

// catalogEntry is one rule of docs/rules.md.
type catalogEntry struct {
	line      int
	scenarios []scenarioRef // the lines "- <file>.feature: <scenario>"
	tests     []scenarioRef // the lines "- <file>: <test function>"
}

// readCatalog reads the entries of docs/rules.md: a heading "### R-XXX-n",
// its text, and a list of the scenarios and tests that prove it.
func readCatalog(tree fs.FS) (map[string]*catalogEntry, []string, error) {
	text, err := fs.ReadFile(tree, rulesCatalog)
	if err != nil {
		return nil, nil, err
	}
	entries := map[string]*catalogEntry{}
	var problems []string
	var cur *catalogEntry
	var curID string
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			cur = nil
			id, ok := strings.CutPrefix(line, "### ")
			if !ok || !ruleID.MatchString(id) {
				continue
			}
			id = strings.TrimSpace(id)
			if ruleID.FindString(id) != id {
				problems = append(problems, fmt.Sprintf("%s:%d: the heading %q is not a rule id alone", rulesCatalog, n, line))
				continue
			}
			if e, dup := entries[id]; dup {
				problems = append(problems, fmt.Sprintf("%s:%d: %s has a second entry (the first at line %d)", rulesCatalog, n, id, e.line))
				continue
			}
			cur, curID = &catalogEntry{line: n}, id
			entries[id] = cur
			continue
		}
		item, ok := strings.CutPrefix(line, "- ")
		if cur == nil || !ok {
			continue
		}
		file, name, ok := strings.Cut(item, ": ")
		file, name = strings.Trim(file, "`"), strings.Trim(strings.TrimSpace(name), "`")
		if !ok || strings.ContainsAny(file, " ") || !strings.Contains(file, "/") {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: %q is not \"- <file>: <scenario or test>\"", rulesCatalog, n, curID, line))
			continue
		}
		ref := scenarioRef{file: file, name: name}
		if strings.HasSuffix(file, ".feature") {
			cur.scenarios = append(cur.scenarios, ref)
		} else {
			cur.tests = append(cur.tests, ref)
		}
	}
	return entries, problems, sc.Err()
}

// gherkinKeyword matches the lines of a feature file that tags apply to.
var gherkinKeyword = regexp.MustCompile(`^\s*(Feature|Rule|Background|Scenario Outline|Scenario Template|Scenario|Example|Examples|Scenarios):\s*(.*)$`)

// readTags returns the scenarios of a feature file with their rule tags: a
// scenario has the rule tags of its Feature, Rule and Examples lines too.
func readTags(text string) map[scenarioRef][]string {
	tags := map[scenarioRef][]string{}
	var feature, rule, pending []string
	var cur *scenarioRef
	for line := range strings.Lines(text) {
		s := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(s, "@"):
			for _, tag := range strings.Fields(s) {
				if strings.HasPrefix(tag, "#") {
					break
				}
				if id, ok := strings.CutPrefix(tag, "@"); ok && ruleID.FindString(id) == id {
					pending = append(pending, id)
				}
			}
			continue
		case strings.HasPrefix(s, "#"):
			continue
		}
		m := gherkinKeyword.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		switch m[1] {
		case "Feature":
			feature, rule, cur = pending, nil, nil
		case "Rule":
			rule, cur = pending, nil
		case "Background":
			cur = nil
		case "Examples", "Scenarios":
			if cur != nil {
				tags[*cur] = append(tags[*cur], pending...)
			}
		default:
			cur = &scenarioRef{name: strings.TrimSpace(m[2])}
			tags[*cur] = slices.Concat(feature, rule, pending)
		}
		pending = nil
	}
	return tags
}

// citingFile reports whether a file's rule ids count as citations: the
// documents and the sources, not the build output or the dependencies.
func citingFile(name string) bool {
	switch path.Ext(name) {
	case ".md", ".go", ".py", ".c", ".h", ".feature":
		return true
	}
	return false
}

// skippedDir reports whether a directory holds no sources of the project.
func skippedDir(name string) bool {
	base := path.Base(name)
	return name != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "build" ||
		base == "node_modules" || base == "__pycache__" || base == "venv")
}

// declares reports whether a source file declares the named function or
// test (Go, Python or C).
func declares(src, name string) bool {
	q := regexp.QuoteMeta(name)
	return regexp.MustCompile(`(?m)^\s*(func (\([^)]*\) )?` + q + `[\[(]|(async )?def ` + q + `\(|\w[\w\s*]* \**` + q + `\()`).MatchString(src)
}

// checkRulesCatalog returns what is wrong with docs/rules.md in the tree.
func checkRulesCatalog(tree fs.FS) ([]string, error) {
	entries, problems, err := readCatalog(tree)
	if err != nil {
		return nil, err
	}
	used := map[string][]string{}        // rule id: the files, or scenarios, that use it
	tagged := map[string][]scenarioRef{} // rule id: the scenarios tagged with it
	scenarios := map[scenarioRef][]string{}
	err = fs.WalkDir(tree, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skippedDir(name) {
				return fs.SkipDir
			}
			return nil
		}
		if !citingFile(name) || name == rulesCatalog {
			return nil
		}
		text, err := fs.ReadFile(tree, name)
		if err != nil {
			return err
		}
		if strings.HasSuffix(name, ".feature") {
			for ref, ids := range readTags(string(text)) {
				ref.file = name
				scenarios[ref] = ids
				for _, id := range ids {
					tagged[id] = append(tagged[id], ref)
					used[id] = append(used[id], ref.String())
				}
			}
		}
		for _, id := range ruleIDs(string(text)) {
			if !slices.ContainsFunc(used[id], func(u string) bool { return u == name || strings.HasPrefix(u, name+": ") }) {
				used[id] = append(used[id], name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range sortedKeys(used) {
		if _, ok := entries[id]; !ok {
			problems = append(problems, fmt.Sprintf("%s is used (%s) but has no entry in %s: add a heading \"### %s\", the rule in a sentence or two, and the scenarios tagged @%s as \"- <file>: <scenario>\"",
				id, strings.Join(firstOf(used[id], 3), "; "), rulesCatalog, id, id))
		}
	}
	for _, id := range sortedKeys(entries) {
		e := entries[id]
		if len(e.scenarios) == 0 {
			problems = append(problems, fmt.Sprintf("%s:%d: %s names no scenario: list at least one scenario tagged @%s", rulesCatalog, e.line, id, id))
		}
		for _, ref := range e.scenarios {
			ids, ok := scenarios[ref]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s:%d: %s lists %s, which does not exist", rulesCatalog, e.line, id, ref))
			case !slices.Contains(ids, id):
				problems = append(problems, fmt.Sprintf("%s:%d: %s lists %s, but %s is not tagged @%s", rulesCatalog, e.line, id, ref, ref, id))
			}
		}
		for _, ref := range tagged[id] {
			if !slices.Contains(e.scenarios, ref) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s does not list %s, which is tagged with it: add \"- %s\"", rulesCatalog, e.line, id, ref, ref))
			}
		}
		for _, ref := range e.tests {
			src, err := fs.ReadFile(tree, ref.file)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: %s names %s: %v", rulesCatalog, e.line, id, ref, err))
				continue
			}
			if !declares(string(src), ref.name) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s names %s, but %s declares no %s", rulesCatalog, e.line, id, ref, ref.file, ref.name))
			}
		}
	}
	return problems, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareRuleIDs)
	return keys
}

// compareRuleIDs orders ids by family, then by number (2 before 10).
func compareRuleIDs(a, b string) int {
	fa, na, _ := strings.Cut(strings.TrimPrefix(a, "R-"), "-")
	fb, nb, _ := strings.Cut(strings.TrimPrefix(b, "R-"), "-")
	if c := strings.Compare(fa, fb); c != 0 {
		return c
	}
	ia, _ := strconv.Atoi(na)
	ib, _ := strconv.Atoi(nb)
	return ia - ib
}

func firstOf(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clone(s[:n]), "...")
	}
	return s
}
