// Command simba runs commands under a Simba lock or leadership, shows a
// client's session and who holds leases, and plays a demo of leader
// election with fencing.
//
// Usage:
//
//	simba demo    [--duration 30s] [--lease 2s]
//	simba lock    [flags] NAME -- COMMAND [ARG...]
//	simba leader  [flags] NAME -- COMMAND [ARG...]
//	simba status  [flags] [--holder NAME]...
//	simba version
//
// The backend comes from --backend URL or the SIMBA_BACKEND variable:
// memory://[NAME] (this process only: lock and leader warn about it),
// redis://, rediss://, postgres://, postgresql://, mysql:// or zk://.
// lock, leader and status take --identity ID, the identity their session
// carries (default HOST:PID), which simba status --holder NAME shows for the
// node that holds NAME. Every command has --help.
//
// Exit codes: 0 success; 1 failure of simba itself; 2 bad usage (unknown
// command or flag, missing argument, bad URL, name or identity, --lease
// above the backend's maximum, an empty --table-prefix, --table-prefix on a
// backend without tables; status --holder on a backend that cannot tell who
// holds a lease); 69 backend unavailable, at start or until --timeout; 75
// lock held elsewhere until --timeout; 76 lock or leadership lost while the
// command ran; 78
// backend not set up (SQL tables missing or outdated: --migrate creates
// them; the URL's database missing; the tables refused to its user); 126 command not executable; 127 command not found; 128+N the command died of signal N, or simba was stopped by
// signal N (SIGINT, SIGTERM, SIGHUP, SIGQUIT) while no command ran.
// Otherwise simba lock and simba leader exit with the command's own code.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/simba-go/simba/core/backendkit"
)

// Exit codes, documented in the package comment and the README.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitUnavailable = 69 // sysexits EX_UNAVAILABLE: the backend could not be asked
	exitLockTimeout = 75 // sysexits EX_TEMPFAIL: held elsewhere, try again later
	exitLockLost    = 76
	exitConfig      = 78  // sysexits EX_CONFIG: the backend is not set up for simba (tables missing)
	exitCannotRun   = 126 // as shells report it
	exitNotFound    = 127 // as shells report it
	exitSignalBase  = 128 // 128+N: ended by signal N, as shells report it
)

func main() {
	ctx, stop := signalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// stopSignals are the signals that stop simba: it stops the command (its
// whole process group), gives the lease up and exits. SIGHUP (the terminal
// closed) and SIGQUIT would otherwise end simba at once and leave the
// command running without the lock.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signalError is the cancellation cause of the context main gives run when
// simba receives one of stopSignals.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return "received " + e.sig.String() }

// exitCode is the conventional exit code of a process ended by e.sig.
func (e signalError) exitCode() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return exitSignalBase + int(s)
	}
	return exitSignalBase + int(syscall.SIGTERM)
}

// signalContext returns a context cancelled with a signalError cause on
// the first of stopSignals; stop ends the watching.
func signalContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, stopSignals...)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(signalError{sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interruptedCode is the exit code after ctx was cancelled: 128+N for a
// signal, 130 (as for SIGINT) otherwise.
func interruptedCode(ctx context.Context) int {
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		return se.exitCode()
	}
	return exitSignalBase + int(syscall.SIGINT)
}

// command is one subcommand of simba.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, a *app, args []string) int
}

// commands lists the subcommands in the order help shows them.
var commands = []command{
	{"demo", "in-process nodes: a paused leader gets fenced off, then partitions move as nodes join and leave", runDemo},
	{"lock", "run a command while holding a lock", runLock},
	{"leader", "run a command whenever this node is the leader", runLeader},
	{"status", "print a client's session, and who holds given leases, as a table or JSON", runStatus},
	{"version", "print the version of simba", runVersion},
}

// app is the environment of one invocation: where output goes and how
// variables are read. Tests run several at once in one process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	secrets        []string // credentials of the backend URL, never printed
}

// run executes the command line args (without the program name) and
// returns the exit code. Cancelling ctx interrupts the command the way
// SIGINT, SIGTERM, SIGHUP or SIGQUIT would.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	return a.run(ctx, args)
}

func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		return a.usageError("", fmt.Errorf("missing command (commands: %s)", commandNames()))
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		a.usage(a.stdout)
		return exitOK
	case "-v", "-version", "--version":
		name = "version"
	case "help":
		return a.help(ctx, args[1:])
	}
	if strings.HasPrefix(name, "-") {
		return a.usageError("", fmt.Errorf("flag %s given before the command; flags go after it", name))
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, a, args[1:])
		}
	}
	return a.usageError("", fmt.Errorf("unknown command %q (commands: %s)", name, commandNames()))
}

func commandNames() string {
	names := make([]string, 0, len(commands)+1)
	for _, c := range commands {
		names = append(names, c.name)
	}
	return strings.Join(append(names, "help"), ", ")
}

// usage prints the overview of every command to w.
func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `simba: leader election and distributed locks on PostgreSQL, MySQL, Redis and Zookeeper

Usage:
  simba COMMAND [flags] [arguments]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-8s %s\n", "help", "print help about a command")
	fmt.Fprint(w, `
The backend is --backend URL or $SIMBA_BACKEND: memory://[NAME] (this process
only), redis://, rediss://, postgres://, mysql:// or zk://.

Run "simba COMMAND --help" for the flags and exit codes of a command.
`)
}

// usageError prints a one-line error about bad usage and returns exitUsage.
// cmd is the subcommand, "" for simba itself.
func (a *app) usageError(cmd string, err error) int {
	prog := "simba"
	if cmd != "" {
		prog += " " + cmd
	}
	a.report(cmd, "%v (see %q)", err, prog+" --help")
	return exitUsage
}

// report prints one line "simba CMD: message" on stderr.
func (a *app) report(cmd, format string, args ...any) {
	prog := "simba"
	if cmd != "" {
		prog += " " + cmd
	}
	fmt.Fprintf(a.stderr, "%s: %s\n", prog, backendkit.MaskText(oneLine(fmt.Sprintf(format, args...)), a.secrets))
}

// oneLine folds a multi-line message (some drivers' errors are) into one
// line: the lines, trimmed, joined with "; ".
func oneLine(msg string) string {
	if !strings.Contains(msg, "\n") {
		return msg
	}
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "; "), ":; ", ": ")
}

// help prints the overview, or the help of one command.
func (a *app) help(ctx context.Context, args []string) int {
	switch {
	case len(args) == 0:
		a.usage(a.stdout)
		return exitOK
	case len(args) > 1:
		return a.usageError("help", errors.New("give at most one command name"))
	case args[0] == "help":
		a.usage(a.stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, a, []string{"--help"})
		}
	}
	return a.usageError("help", fmt.Errorf("unknown command %q (commands: %s)", args[0], commandNames()))
}
