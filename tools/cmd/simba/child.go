package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	simba "github.com/simba-go/simba/core"
)

// The variables simba lock and simba leader add to the command's
// environment.
const (
	envLease = "SIMBA_LEASE" // the lease name
	envToken = "SIMBA_TOKEN" // the term's fencing token, in decimal
)

// defaultGrace is how long a command may take to exit after SIGTERM
// before it gets SIGKILL.
const defaultGrace = 5 * time.Second

// commandLine is what simba lock and simba leader share: the client
// flags, --grace, NAME and the command to run.
type commandLine struct {
	*cmdFlags
	client clientFlags
	grace  time.Duration
	name   string
	argv   []string
	path   string // argv[0] resolved
}

func newCommandLine(cmd, synopsis, about string) *commandLine {
	c := &commandLine{cmdFlags: newFlags(cmd, synopsis, about)}
	c.client.register(c.FlagSet)
	c.DurationVar(&c.grace, "grace", defaultGrace, "how long the command has to exit after SIGTERM before SIGKILL")
	return c
}

// parse parses args and checks the name, --grace and the command, before
// any backend is contacted. On failure it has printed why and returns the
// exit code and false.
func (c *commandLine) parse(a *app, args []string) (int, bool) {
	var err error
	if c.name, c.argv, err = c.parseCommandLine(args); err != nil {
		return c.fail(a, err), false
	}
	if err := simba.ValidateName(c.name); err != nil {
		return a.usageError(c.cmd, err), false
	}
	if c.grace < 0 {
		return a.usageError(c.cmd, fmt.Errorf("--grace %v: must not be negative", c.grace)), false
	}
	path, code, err := lookCommand(c.argv[0])
	if err != nil {
		a.report(c.cmd, "%v", err)
		return code, false
	}
	c.path = path
	return exitOK, true
}

// lookCommand resolves the program of a command like a shell does. On
// failure it returns exitNotFound or exitCannotRun and the error to print.
func lookCommand(program string) (string, int, error) {
	path, err := exec.LookPath(program)
	switch {
	case err == nil:
		return path, exitOK, nil
	case errors.Is(err, fs.ErrPermission):
		return "", exitCannotRun, fmt.Errorf("command %q is not executable", program)
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return "", exitNotFound, fmt.Errorf("command %q not found", program)
	default:
		return "", exitNotFound, fmt.Errorf("command %q: %w", program, err)
	}
}

// child is a command run for one term.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the command exited and its output is copied
	err  error         // the result of Wait, read after done
}

// startChild starts the command of c with the lease name and the term's
// token in its environment, on the standard streams of a.
func startChild(a *app, c *commandLine, t *simba.Term) (*child, error) {
	cmd := exec.Command(c.path, c.argv[1:]...)
	cmd.Args[0] = c.argv[0]
	cmd.Env = append(os.Environ(), envLease+"="+t.Name(), envToken+"="+strconv.FormatUint(t.Token(), 10))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	// A grandchild that keeps the output pipes open must not hold simba
	// up once the command itself has exited.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		ch.err = cmd.Wait()
		close(ch.done)
	}()
	return ch, nil
}

// stop sends SIGTERM to the command, SIGKILL after grace if it is still
// running, and waits for it to exit.
func (c *child) stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = c.cmd.Process.Kill()
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return
	case <-t.C:
	}
	_ = c.cmd.Process.Kill()
	<-c.done
}

// exitCode is the command's exit code as a shell reports it: its own code,
// or 128+N when signal N ended it. Call it after done is closed.
func (c *child) exitCode() int {
	ps := c.cmd.ProcessState
	if ps == nil {
		return exitFailure
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	if code := ps.ExitCode(); code >= 0 {
		return code
	}
	return exitFailure
}
