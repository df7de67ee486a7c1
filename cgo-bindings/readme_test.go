package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readmesWithPython are the documents whose ```python blocks are whole
// programs, each run as it is written.
var readmesWithPython = []string{"python/README.md", "README.md", "../README.md"}

// fragmentMark is the first line of a block that is deliberately not a
// whole program; such a block is not run.
const fragmentMark = "# fragment"

type pythonBlock struct {
	file string
	line int // of the opening fence
	code string
}

// pythonBlocks returns the ```python blocks of a Markdown document.
func pythonBlocks(t *testing.T, file string) []pythonBlock {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []pythonBlock
	var cur *pythonBlock
	for i, line := range strings.Split(string(text), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```python":
			cur = &pythonBlock{file: file, line: i + 1}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: a python block is never closed", file, cur.line)
	}
	return blocks
}

// clientURL finds the URL of every Client the block opens.
var clientURL = regexp.MustCompile(`Client\(\s*["']([^"']*)["']`)

// TestReadmePythonBlocks runs every ```python block of the READMEs with the
// library this test built: a reader who copies one gets a program that
// runs, on the memory backend, within seconds.
func TestReadmePythonBlocks(t *testing.T) {
	py := python(t, "ctypes")
	env := pythonEnv(t)
	pkg, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "PYTHONPATH="+pkg)
	ran := 0
	for _, file := range readmesWithPython {
		for _, b := range pythonBlocks(t, file) {
			if strings.HasPrefix(b.code, fragmentMark+"\n") {
				continue
			}
			ran++
			t.Run(strings.NewReplacer("../", "root_", "/", "_").Replace(b.file)+":"+strconv.Itoa(b.line), func(t *testing.T) {
				for _, m := range clientURL.FindAllStringSubmatch(b.code, -1) {
					if !strings.HasPrefix(m[1], "memory://") {
						t.Errorf("%s:%d: Client(%q): the examples run on memory://", b.file, b.line, m[1])
					}
				}
				cmd := exec.Command(py, "-X", "dev", "-W", "error", "-c", b.code)
				cmd.Dir, cmd.Env = t.TempDir(), env
				start := time.Now()
				out := runBlock(t, 30*time.Second, cmd, b)
				t.Logf("%s:%d ran in %v\n%s", b.file, b.line, time.Since(start).Round(time.Millisecond), out)
			})
		}
	}
	if ran == 0 {
		t.Fatal("no python block found in the READMEs")
	}
}

// runBlock runs a block and fails the test, naming the block, when the
// program fails or outlives its timeout.
func runBlock(t *testing.T, timeout time.Duration, cmd *exec.Cmd, b pythonBlock) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Dir, c.Env = cmd.Dir, cmd.Env
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s:%d: the block still ran after %v\n%s", b.file, b.line, timeout, out)
	}
	if err != nil {
		t.Fatalf("%s:%d: %v\n%s", b.file, b.line, err, out)
	}
	return string(out)
}
