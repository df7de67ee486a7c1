package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareSummarize: compare.sh --summarize takes, per line, the
// median ops_s of each side over its rounds and the range of the
// round-by-round ratios, and marks a line one side lacks.
func TestCompareSummarize(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skipf("no bash: %v", err)
	}
	dir := t.TempDir()
	line := func(impl, ops string) string {
		return "bench backend=postgres impl=" + impl + " op=acquire_release ops_s=" + ops + " p50_us=300 p99_us=900\n"
	}
	for name, text := range map[string]string{
		"old.1.out": line("simba", "1000") + line("floor", "2000"),
		"old.2.out": line("simba", "1200"),
		"old.3.out": line("simba", "5000"),
		"new.1.out": line("simba", "1100") + line("lean", "3000"),
		"new.2.out": line("simba", "1800"),
		"new.3.out": line("simba", "1300"),
		"old.1.log": "not a bench line\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(bash, "compare.sh", "--summarize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("compare.sh --summarize: %v\n%s", err, out)
	}
	got := map[string][]string{}
	for l := range strings.Lines(string(out)) {
		f := strings.Fields(l)
		if len(f) == 7 {
			got[strings.Join(f[:3], " ")] = f[3:]
		}
	}
	for key, want := range map[string][]string{
		// medians 1200 and 1300; pairs 1.10, 1.50, 0.26
		"postgres simba acquire_release": {"1200", "1300", "1.08", "0.26-1.50"},
		"postgres floor acquire_release": {"2000", "-", "-", "-"},
		"postgres lean acquire_release":  {"-", "3000", "-", "-"},
	} {
		if g := got[key]; strings.Join(g, " ") != strings.Join(want, " ") {
			t.Errorf("%s: %v, want %v\n%s", key, g, want, out)
		}
	}
}
