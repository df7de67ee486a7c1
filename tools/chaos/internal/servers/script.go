package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoTestenv is returned by FindLib (and so by Start) when
// tools/testenv/lib.sh cannot be found above the working directory.
var ErrNoTestenv = errors.New("servers: tools/testenv/lib.sh not found above the working directory")

// Script is a bash script that sources tools/testenv/lib.sh: it runs as
// `bash Path Lib args...`. This package's server.sh is one, and so is the
// script of every topology.
type Script struct {
	Path string // the script
	Lib  string // tools/testenv/lib.sh, its first argument
	// Env is the script's environment; nil is this process's.
	Env []string
	// Timeout bounds one run; 0 leaves the bound to ctx.
	Timeout time.Duration
	// Secret, when not empty, is masked in the output an error carries.
	Secret string
}

// WriteScript makes dir and writes script into it as the executable file
// name, and returns it as a Script that finds lib.sh above the working
// directory.
func WriteScript(dir, name string, script []byte) (Script, error) {
	lib, err := FindLib()
	if err != nil {
		return Script{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Script{}, fmt.Errorf("servers: %w", err)
	}
	sh := filepath.Join(dir, name)
	if err := os.WriteFile(sh, script, 0o755); err != nil {
		return Script{}, fmt.Errorf("servers: %w", err)
	}
	return Script{Path: sh, Lib: lib}, nil
}

// Run runs the script with args and returns its standard output. When it
// fails, the error names the script and args and carries what the script
// wrote, standard error first.
func (s Script) Run(ctx context.Context, args ...string) (string, error) {
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{s.Path, s.Lib}, args...)...)
	cmd.Env = s.Env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String() + string(out))
		if s.Secret != "" {
			msg = strings.ReplaceAll(msg, s.Secret, "********")
		}
		return "", fmt.Errorf("%s %s: %w\n%s", filepath.Base(s.Path), strings.Join(args, " "), err, msg)
	}
	return string(out), nil
}

// FindLib returns the path of tools/testenv/lib.sh in the first directory
// above the working directory that has one, or ErrNoTestenv.
func FindLib() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	for {
		lib := filepath.Join(dir, "tools", "testenv", "lib.sh")
		if _, err := os.Stat(lib); err == nil {
			return lib, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoTestenv
		}
		dir = parent
	}
}

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("servers: %w", err)
		}
		defer ln.Close() // held until all are chosen, so that they differ
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ReadPid returns the process id in a pid file a script of lib.sh wrote.
// Its error names the file; the caller names the server.
func ReadPid(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("no pid in %s: %q", file, b)
	}
	return pid, nil
}
