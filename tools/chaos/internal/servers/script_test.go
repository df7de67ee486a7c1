package servers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testScript writes a script that echoes its arguments and the value of
// WORD, and fails when its first action is "fail".
func testScript(t *testing.T) Script {
	t.Helper()
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Join("tools", "testenv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("tools", "testenv", "lib.sh"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := WriteScript(filepath.Join(t.TempDir(), "s"), "test.sh", []byte(`lib=$1; shift
. "$lib"
if [ "$1" = fail ]; then echo "out $WORD"; echo "err $WORD" >&2; exit 3; fi
echo "$@ $WORD"
`))
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

func TestScriptRun(t *testing.T) {
	sh := testScript(t)
	sh.Env = append(os.Environ(), "WORD=hunter2")
	out, err := sh.Run(context.Background(), "say", "a")
	if err != nil || out != "say a hunter2\n" {
		t.Errorf("Run(say a) = %q, %v; want %q", out, err, "say a hunter2\n")
	}
	sh.Secret = "hunter2"
	_, err = sh.Run(context.Background(), "fail", "b")
	if err == nil {
		t.Fatal("Run(fail b) did not fail")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "test.sh fail b: exit status 3\n") || strings.Contains(msg, "hunter2") ||
		!strings.Contains(msg, "err ********") || !strings.Contains(msg, "out ********") {
		t.Errorf("Run(fail b) error %q: want the script and args, its output, the secret masked", msg)
	}
}

func TestFindLibMissing(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := FindLib(); !errors.Is(err, ErrNoTestenv) {
		t.Errorf("FindLib() error %v, want ErrNoTestenv", err)
	}
}

func TestFreePortsDiffer(t *testing.T) {
	ports, err := FreePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ports)
	if len(slices.Compact(ports)) != 8 {
		t.Errorf("FreePorts(8) = %v: want 8 distinct ports", ports)
	}
}

func TestReadPid(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		give    string
		want    int
		wantErr bool
	}{
		{give: "1234\n", want: 1234},
		{give: "", wantErr: true},
		{give: "1", wantErr: true},
		{give: "x", wantErr: true},
	} {
		file := filepath.Join(dir, "pid")
		if err := os.WriteFile(file, []byte(tt.give), 0o644); err != nil {
			t.Fatal(err)
		}
		pid, err := ReadPid(file)
		if pid != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ReadPid(%q) = %d, %v; want %d, error %v", tt.give, pid, err, tt.want, tt.wantErr)
		}
	}
	if _, err := ReadPid(filepath.Join(dir, "none")); err == nil {
		t.Error("ReadPid of a missing file did not fail")
	}
}
