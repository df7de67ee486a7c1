package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// envPrefix starts the names of simba's own variables. None is passed on
// to the command but envLease and envToken: SIMBA_BACKEND may hold a
// password.
const envPrefix = "SIMBA_"

// killWait bounds the wait for the command's process group to vanish
// after SIGKILL.
const killWait = time.Second

// commandLine is what simba lock and simba leader share: the client
// flags, --grace, NAME and the command to run.
type commandLine struct {
	*cmdFlags
	client clientFlags
	grace  time.Duration // resolved by resolveGrace once the client is open
	name   string
	argv   []string
	path   string // argv[0] resolved
}

func newCommandLine(cmd, synopsis, about string) *commandLine {
	c := &commandLine{cmdFlags: newFlags(cmd, synopsis, about)}
	c.client.register(c.FlagSet)
	c.DurationVar(&c.grace, "grace", 0, fmt.Sprintf("how long the command's processes have to exit after SIGTERM before SIGKILL "+
		"(default: the safety gap, --lease × drift + margin: %v with the default --lease)", safetyGap(simba.DefaultConfig())))
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

// startFailureCode is the exit code for err of startChild on the program
// at path, as a shell reports it: exitNotFound for a program that is gone
// (removed after lookCommand found it, at a later term of simba leader,
// say), exitCannotRun for one that is there but cannot run, a script
// whose interpreter is missing included (the start fails with ENOENT for
// the interpreter, and the program itself is still there).
func startFailureCode(path string, err error) int {
	if errors.Is(err, exec.ErrNotFound) {
		return exitNotFound
	}
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(path); serr != nil {
			return exitNotFound
		}
	}
	return exitCannotRun
}

// safetyGap is how long the backend keeps a lease after the local deadline
// of the session that holds it has passed (R-DL-1): the deadline,
// sentAt + lease*(1-drift) - margin, comes lease*drift + margin before the
// backend's expiry, which counts from a later instant. A command stopped
// within the gap is gone before another node can hold the lease; besides,
// another node takes the lease only at its next acquire attempt after the
// backend freed it, at least a round trip later, which covers the delivery
// of SIGKILL at the gap's end. The drift part assumes clocks that run at
// the same rate: drift is there to absorb a faster backend clock, and at
// that bound the margin alone is left.
func safetyGap(cfg simba.Config) time.Duration {
	return time.Duration(float64(cfg.LeaseDuration)*cfg.Drift) + cfg.Margin
}

// connect opens the backend and a client on it, as clientFlags.connect
// does, then warns when the store is this process's own and resolves
// --grace from the client's configuration. On failure it has printed the
// error and returns nil and the exit code; the caller closes the node.
func (c *commandLine) connect(ctx context.Context, a *app) (*node, int) {
	n, code := c.client.connect(ctx, a, c.cmd)
	if n == nil {
		return nil, code
	}
	n.warnInProcess(a, c.cmd, c.name)
	c.resolveGrace(a, n.client.Config())
	return n, exitOK
}

// resolveGrace sets --grace to the safety gap of cfg when it was not given,
// and warns on stderr when the given value exceeds the gap.
func (c *commandLine) resolveGrace(a *app, cfg simba.Config) {
	gap := safetyGap(cfg)
	switch {
	case !c.given("grace"):
		c.grace = gap
	case c.grace > gap:
		a.report(c.cmd, "warning: --grace %v exceeds the safety gap of %v (--lease %v × drift %v + margin %v): "+
			"after a lost term the command may run for up to %v while another node holds the lease",
			c.grace, gap, cfg.LeaseDuration, cfg.Drift, cfg.Margin, c.grace)
	}
}

// child is a command run for one term, as the leader of a process group
// of its own: simba stops the command with every process it started,
// unless one of them moved to another group or session.
type child struct {
	cmd  *exec.Cmd
	pgid int           // the command's process group, its pid
	done chan struct{} // closed once the command exited and its output is copied
	err  error         // the result of Wait, read after done
}

// startChild starts the command of c with the lease name and the term's
// token in its environment, on the standard streams of a.
func startChild(a *app, c *commandLine, t *simba.Term) (*child, error) {
	cmd := exec.Command(c.path, c.argv[1:]...)
	cmd.Args[0] = c.argv[0]
	cmd.Env = commandEnv(os.Environ(), t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.SysProcAttr = commandAttr()
	// A process of the command's group that keeps the output pipes open
	// must not hold simba up once the command itself has exited.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, pgid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		ch.err = cmd.Wait()
		close(ch.done)
	}()
	return ch, nil
}

// commandEnv returns environ without simba's own variables (envPrefix,
// in any case), and with the lease name and the term's token.
func commandEnv(environ []string, t *simba.Term) []string {
	env := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		if len(kv) >= len(envPrefix) && strings.EqualFold(kv[:len(envPrefix)], envPrefix) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, envLease+"="+t.Name(), envToken+"="+strconv.FormatUint(t.Token(), 10))
}

// exited reports whether the command itself has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// gone reports whether the command has exited and no process of its group
// is left running.
func (c *child) gone() bool {
	return c.exited() && !c.groupRunning()
}

// stop ends the command and every process of its group: SIGTERM (with
// SIGCONT, so that a stopped process gets it), then SIGKILL when a process
// is left after grace. It returns once the command has exited and the
// group is gone, or killWait after SIGKILL; it reports false in that last
// case, when some process survived SIGKILL.
func (c *child) stop(grace time.Duration) bool {
	if c.gone() {
		return true
	}
	c.terminate()
	if c.waitGone(grace) {
		return true
	}
	c.kill()
	return c.waitGone(killWait)
}

// stopRest stops what the command left running in its group after it
// exited on its own, with a line on stderr when there was something.
func (c *child) stopRest(a *app, cmd string, grace time.Duration) {
	if c.gone() {
		return
	}
	a.report(cmd, "%s exited; stopping the processes it left running", c.cmd.Args[0])
	c.stopGroup(a, cmd, grace)
}

// stopGroup is stop, with a line on stderr when a process survives it.
func (c *child) stopGroup(a *app, cmd string, grace time.Duration) {
	if !c.stop(grace) {
		a.report(cmd, "a process of %s (process group %d) survived SIGKILL for %v", c.cmd.Args[0], c.pgid, killWait)
	}
}

// waitGone polls, at most for limit, until the command has exited and no
// process of its group runs. It reports whether that happened.
func (c *child) waitGone(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	interval := time.Millisecond
	for {
		if c.gone() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		var done <-chan struct{}
		if !c.exited() {
			done = c.done
		}
		t := time.NewTimer(min(interval, left))
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
		interval = min(2*interval, 20*time.Millisecond)
	}
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
