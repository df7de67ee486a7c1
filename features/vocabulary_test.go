package features

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	gherkin "github.com/cucumber/gherkin/go/v42"
	messages "github.com/cucumber/messages/go/v34"
)

// maxSteps is the most step patterns the suite may bind: a small
// vocabulary, whose steps take parameters, rather than a sentence per
// scenario.
const maxSteps = 100

// TestVocabulary checks the step vocabulary against the feature files:
// at most maxSteps patterns, each used by some step of a scenario, and
// each step of a scenario matched by exactly one pattern, and read by
// exactly one of its phrases. With -v it reports how many patterns and
// sentences (a pattern without phrases, or a phrase) serve a single line
// of the features.
func TestVocabulary(t *testing.T) {
	type pattern struct {
		re *regexp.Regexp
		ps phrases
	}
	var pats []pattern
	(&world{}).registerSteps(func(expr string, fn any) {
		ps, _ := fn.(phrases)
		pats = append(pats, pattern{regexp.MustCompile(expr), ps})
	})
	lines, err := featureSteps(".")
	if err != nil {
		t.Fatal(err)
	}
	uses := make(map[string]map[string]bool) // pattern or phrase -> lines
	use := func(key, at string) {
		if uses[key] == nil {
			uses[key] = make(map[string]bool)
		}
		uses[key][at] = true
	}
	for _, l := range lines {
		var matched []string
		for _, p := range pats {
			m := p.re.FindStringSubmatch(l.text)
			if m == nil {
				continue
			}
			matched = append(matched, p.re.String())
			use(p.re.String(), l.at)
			if p.ps == nil {
				continue
			}
			within := strings.HasPrefix(p.re.String(), withinGroup) && m[1] != ""
			ph, _, err := p.ps.match(m[len(m)-1], within)
			if err != nil {
				t.Errorf("%s: %v", l.at, err)
				continue
			}
			use(p.re.String()+" / "+ph.re.String(), l.at)
		}
		if len(matched) != 1 {
			t.Errorf("%s: %q is matched by %d patterns %q", l.at, l.text, len(matched), matched)
		}
	}
	var patterns, sentences, singlePatterns, singleSentences int
	for _, p := range pats {
		patterns++
		n := len(uses[p.re.String()])
		if n == 0 {
			t.Errorf("the pattern %s matches no step of the features", p.re)
		}
		if n == 1 {
			singlePatterns++
		}
		if p.ps == nil {
			sentences++
			if n == 1 {
				singleSentences++
			}
			continue
		}
		for _, ph := range p.ps {
			sentences++
			switch len(uses[p.re.String()+" / "+ph.re.String()]) {
			case 0:
				t.Errorf("the phrase %s of %s reads no step of the features", ph.re, p.re)
			case 1:
				singleSentences++
			}
		}
	}
	t.Logf("%d step patterns, %d of them serving one line of the features; %d sentences, %d serving one line; %d step lines",
		patterns, singlePatterns, sentences, singleSentences, len(distinctLines(lines)))
	if patterns > maxSteps {
		t.Errorf("%d step patterns, more than %d: make an existing step take a parameter rather than add one", patterns, maxSteps)
	}
}

// stepLine is one step of a scenario, as godog runs it (a Scenario
// Outline's step once per row of its examples), and where it is written.
type stepLine struct {
	text, at string
}

func distinctLines(lines []stepLine) map[string]bool {
	out := make(map[string]bool)
	for _, l := range lines {
		out[l.at] = true
	}
	return out
}

// featureSteps returns the steps of every feature file in dir.
func featureSteps(dir string) ([]stepLine, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.feature"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []stepLine
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ids := &messages.Incrementing{}
		doc, err := gherkin.ParseGherkinDocument(strings.NewReader(string(text)), ids.NewId)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		where := make(map[string]int64) // step id -> line
		collect := func(steps []*messages.Step) {
			for _, s := range steps {
				where[s.Id] = s.Location.Line
			}
		}
		for _, c := range doc.Feature.Children {
			switch {
			case c.Background != nil:
				collect(c.Background.Steps)
			case c.Scenario != nil:
				collect(c.Scenario.Steps)
			case c.Rule != nil:
				for _, rc := range c.Rule.Children {
					if rc.Background != nil {
						collect(rc.Background.Steps)
					}
					if rc.Scenario != nil {
						collect(rc.Scenario.Steps)
					}
				}
			}
		}
		for _, p := range gherkin.Pickles(*doc, f, ids.NewId) {
			for _, s := range p.Steps {
				out = append(out, stepLine{text: s.Text, at: fmt.Sprintf("%s:%d", f, where[s.AstNodeIds[0]])})
			}
		}
	}
	return out, nil
}

// TestStepLocation checks that a failing step names the file and line of
// its own method, not the adapter that runs it.
func TestStepLocation(t *testing.T) {
	w := &world{nodes: make(map[string]*node)}
	var h any
	w.registerSteps(func(expr string, fn any) {
		if ps, ok := fn.(phrases); ok && h == nil && strings.Contains(expr, "[A-Z](?: and [A-Z])?) (.+)$") {
			h = w.handler(expr, ps)
		}
	})
	step, ok := h.(func(string, string, string) error)
	if !ok {
		t.Fatalf("the pattern of what nodes do has a handler of type %T", h)
	}
	err := step("", "Z", `is leader of "report"`)
	if err == nil {
		t.Fatal("a step about a node that is not connected passed")
	}
	at, _, _ := strings.Cut(err.Error(), " ")
	file, line, _ := strings.Cut(at, ":")
	text, rerr := os.ReadFile(file)
	if rerr != nil {
		t.Fatalf("the failure %q does not begin with a file of the package: %v", err, rerr)
	}
	n, _ := strconv.Atoi(line)
	lines := strings.Split(string(text), "\n")
	if n < 1 || n > len(lines) || !strings.HasPrefix(lines[n-1], "func (w *world) isLeader(") {
		t.Errorf("the failure %q does not point to the declaration of isLeader", err)
	}
}
