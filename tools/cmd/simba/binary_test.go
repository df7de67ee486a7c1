package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// simbaBin is the simba command built once for the tests that run it as a
// process of its own; TestMain removes it.
var simbaBin struct {
	once      sync.Once
	dir, path string
	err       error
	out       []byte
}

// simbaBinary builds the simba command (the first time) and returns its
// path.
func simbaBinary(t *testing.T) string {
	t.Helper()
	simbaBin.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			simbaBin.err = err
			return
		}
		// One build for every test of the run, not one per test: TestMain
		// removes it.
		if simbaBin.dir, simbaBin.err = os.MkdirTemp("", "simba-cli-test-"); simbaBin.err != nil { //nolint:usetesting // shared by the tests
			return
		}
		path := filepath.Join(simbaBin.dir, "simba")
		build := exec.Command(goTool, "build", "-o", path, ".")
		if simbaBin.out, simbaBin.err = build.CombinedOutput(); simbaBin.err == nil {
			simbaBin.path = path
		}
	})
	if simbaBin.err != nil {
		if os.Getenv("CI") == "" && simbaBin.out == nil {
			t.Skipf("cannot build simba: %v", simbaBin.err)
		}
		t.Fatalf("building simba: %v\n%s", simbaBin.err, strings.TrimSpace(string(simbaBin.out)))
	}
	return simbaBin.path
}

// removeSimbaBinary removes what simbaBinary built.
func removeSimbaBinary() {
	if simbaBin.dir != "" {
		_ = os.RemoveAll(simbaBin.dir)
	}
}
