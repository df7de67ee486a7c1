package main

import (
	"archive/zip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/cgo-bindings/internal/capi"
)

// wheelPython returns a python3 that can build the wheel and make a venv
// with pip: setuptools, wheel's bdist_wheel and ensurepip (Debian:
// python3-setuptools, python3-wheel, python3-venv).
func wheelPython(t *testing.T) string {
	t.Helper()
	for _, c := range []string{os.Getenv("SIMBA_PYTHON"), "python3", "/usr/bin/python3"} {
		if c == "" {
			continue
		}
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import ensurepip, setuptools.build_meta, wheel.bdist_wheel").Run() == nil {
			return path
		}
	}
	missing(t, "no python3 with setuptools, wheel and ensurepip (Debian: python3-setuptools, python3-wheel, python3-venv)")
	return ""
}

// userEnv is the environment of a user who never set SIMBA_LIBRARY, nor a
// Python or pip setting: pip reads no configuration file.
func userEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SIMBA_LIBRARY=") || strings.HasPrefix(kv, "PYTHON") || strings.HasPrefix(kv, "PIP_")
	})
	return append(env, "PIP_CONFIG_FILE="+os.DevNull, "PYTHONDONTWRITEBYTECODE=1")
}

// TestWheelInFreshVenv does what a Python user does (README.md, "Python on
// Debian, offline"): scripts/wheel.sh builds the wheel, a fresh venv
// without the system's packages installs it with pip and no package index,
// and a program run outside the source tree, with SIMBA_LIBRARY unset,
// imports simba and takes a lock with the library the wheel carries.
func TestWheelInFreshVenv(t *testing.T) {
	dir := library(t)
	py := wheelPython(t)
	tmp := t.TempDir()
	dist := filepath.Join(tmp, "dist")

	build := exec.Command("sh", "scripts/wheel.sh", dist)
	build.Env = append(userEnv(), "LIBSIMBA="+filepath.Join(dir, "libsimba.so"), "PYTHON="+py)
	t.Log(run(t, 2*time.Minute, build))

	// The wheel carries native code: it is tagged for this platform, for
	// any Python 3 (ctypes, no interpreter ABI), and installs into platlib.
	out, err := exec.Command(py, "-c", "import sysconfig; print(sysconfig.get_platform())").Output()
	if err != nil {
		t.Fatal(err)
	}
	platform := strings.NewReplacer("-", "_", ".", "_").Replace(strings.TrimSpace(string(out)))
	wheels, _ := filepath.Glob(filepath.Join(dist, "*.whl"))
	if len(wheels) != 1 {
		t.Fatalf("wheel.sh left %v in %s, want one wheel", wheels, dist)
	}
	wheel := wheels[0]
	// The version of pyproject.toml is the library's.
	if name, want := filepath.Base(wheel), "simba-"+capi.Version+"-py3-none-"+platform+".whl"; name != want {
		t.Errorf("the wheel is %s, want %s", name, want)
	}
	checkWheel(t, wheel)

	venv := filepath.Join(tmp, "venv")
	t.Log(run(t, time.Minute, withEnv(exec.Command(py, "-m", "venv", venv))))
	vpy := filepath.Join(venv, "bin", "python")
	t.Log(run(t, time.Minute, withEnv(exec.Command(vpy, "-m", "pip", "install", "--no-index", wheel))))

	// Run in a directory of its own, so that only the installed package can
	// be imported.
	prog := exec.Command(vpy, "-c", `
import os, sys
import simba
from simba import _lib
assert "SIMBA_LIBRARY" not in os.environ
print("loads", _lib.library_path())
assert _lib.library_path().startswith(sys.prefix + os.sep), "the library does not come from the venv"
with simba.Client("memory://wheel-test", lease=3) as client:
    with client.lock("first-lock", timeout=5) as term:
        print("holds first-lock with token", term.token)
`)
	prog.Dir = t.TempDir()
	prog = withEnv(prog)
	got := run(t, time.Minute, prog)
	t.Log(got)
	if !regexp.MustCompile(`holds first-lock with token [1-9]`).MatchString(got) {
		t.Errorf("the program took no lock:\n%s", got)
	}

	// SIMBA_LIBRARY, when set, overrides the library of the wheel.
	override := filepath.Join(dir, "libsimba.so")
	check := exec.Command(vpy, "-c", "from simba import _lib; import simba; simba.version(); print(_lib.library_path())")
	check.Dir = prog.Dir
	check.Env = append(userEnv(), "SIMBA_LIBRARY="+override)
	if got := strings.TrimSpace(run(t, time.Minute, check)); got != override {
		t.Errorf("with SIMBA_LIBRARY=%s the package loads %s", override, got)
	}
}

func withEnv(cmd *exec.Cmd) *exec.Cmd {
	cmd.Env = userEnv()
	return cmd
}

// checkWheel opens the wheel: simba/libsimba.so at its root, and a WHEEL
// file that says it is not pure Python.
func checkWheel(t *testing.T, path string) {
	t.Helper()
	r, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var lib bool
	for _, f := range r.File {
		switch {
		case f.Name == "simba/libsimba.so":
			lib = f.UncompressedSize64 > 0
		case strings.HasSuffix(f.Name, ".dist-info/WHEEL"):
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			meta, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(meta), "Root-Is-Purelib: false") {
				t.Errorf("%s says the wheel is pure Python:\n%s", f.Name, meta)
			}
		}
	}
	if !lib {
		t.Error("the wheel does not carry simba/libsimba.so")
	}
}
