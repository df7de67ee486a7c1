package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// cmdFlags is the flag set of one command with its help text. Flags are
// accepted with one or two dashes, before and between the positional
// arguments, and never after "--".
type cmdFlags struct {
	*flag.FlagSet
	cmd      string // "lock"
	synopsis string // the usage line after "simba "
	about    string // what the command does, exit codes included
}

func newFlags(cmd, synopsis, about string) *cmdFlags {
	fs := flag.NewFlagSet("simba "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported on one line by fail
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, cmd: cmd, synopsis: synopsis, about: about}
}

// given reports whether the flag name was set on the command line (an
// empty value included), as opposed to left at its default.
func (f *cmdFlags) given(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// help prints the command's help to w.
func (f *cmdFlags) help(w io.Writer) {
	fmt.Fprintf(w, "Usage:\n  simba %s\n\n%s\n", f.synopsis, strings.TrimSpace(f.about))
	var lines [][2]string
	width := 0
	f.VisitAll(func(fl *flag.Flag) {
		kind, usage := flag.UnquoteUsage(fl)
		left := "--" + fl.Name
		if kind != "" {
			left += " " + kind
		}
		if def := fl.DefValue; def != "" && def != "false" && def != "0s" && def != "0" {
			usage += fmt.Sprintf(" (default %s)", def)
		}
		width = max(width, len(left))
		lines = append(lines, [2]string{left, usage})
	})
	if len(lines) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		for _, l := range lines {
			fmt.Fprintf(w, "  %-*s  %s\n", width, l[0], l[1])
		}
	}
}

// fail turns a parse error into an exit code: the help on stdout and 0
// for --help, a one-line error on stderr and exitUsage otherwise.
func (f *cmdFlags) fail(a *app, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		f.help(a.stdout)
		return exitOK
	}
	return a.usageError(f.cmd, errors.New(f.durationWanted(dashDash(err.Error()))))
}

// durationWanted rewrites the "parse error" that package flag gives for a
// value of a duration flag that time.ParseDuration refuses, saying what
// is wanted instead. Other messages are returned as they are.
func (f *cmdFlags) durationWanted(msg string) string {
	head, ok := strings.CutSuffix(msg, ": parse error")
	if !ok {
		return msg
	}
	i := strings.LastIndex(head, " for flag --")
	if i < 0 {
		return msg
	}
	fl := f.Lookup(head[i+len(" for flag --"):])
	if fl == nil {
		return msg
	}
	if g, ok := fl.Value.(flag.Getter); !ok {
		return msg
	} else if _, ok := g.Get().(time.Duration); !ok {
		return msg
	}
	return head + ": want a duration such as 30s, 500ms or 1m30s"
}

// dashDash rewrites the messages of package flag, which name a flag with
// one dash ("flag provided but not defined: -foo"), to name it with two,
// as the help does. Other messages are returned as they are.
func dashDash(msg string) string {
	for _, prefix := range []string{"flag provided but not defined: -", "flag needs an argument: -"} {
		if name, ok := strings.CutPrefix(msg, prefix); ok {
			return prefix + "-" + name
		}
	}
	// invalid value "V" for flag -NAME: ERR; invalid boolean value "V" for -NAME: ERR
	for _, prefix := range []string{"invalid value ", "invalid boolean value "} {
		rest, ok := strings.CutPrefix(msg, prefix)
		if !ok {
			continue
		}
		value, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return msg
		}
		after := rest[len(value):]
		for _, sep := range []string{" for flag -", " for -"} {
			if name, ok := strings.CutPrefix(after, sep); ok {
				return prefix + value + " for flag --" + name
			}
		}
		return msg
	}
	// invalid boolean flag NAME: ERR
	if rest, ok := strings.CutPrefix(msg, "invalid boolean flag "); ok {
		return "invalid boolean flag --" + rest
	}
	return msg
}

// parseArgs parses args, allowing flags between positional arguments, and
// checks that exactly want positional arguments were given (any number
// when want < 0).
func (f *cmdFlags) parseArgs(args []string, want int, names string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			return nil, err
		}
		args = f.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	switch {
	case want < 0 || len(pos) == want:
		return pos, nil
	case len(pos) < want:
		return nil, fmt.Errorf("missing argument: want %s", names)
	default:
		return nil, fmt.Errorf("unexpected argument %q", pos[want])
	}
}

// parseCommandLine parses "[flags] NAME [flags] -- COMMAND [ARG...]". The
// "--" may be left out: the command then starts at the first argument
// after NAME that is not a flag of simba.
func (f *cmdFlags) parseCommandLine(args []string) (name string, cmd []string, err error) {
	sep := -1
	for i, arg := range args {
		if arg == "--" {
			sep = i
			break
		}
	}
	var pos []string
	if sep >= 0 {
		cmd = args[sep+1:]
		if pos, err = f.parseArgs(args[:sep], -1, ""); err != nil {
			return "", nil, err
		}
		if len(pos) > 1 {
			return "", nil, fmt.Errorf("unexpected argument %q before --", pos[1])
		}
	} else {
		// Parse flags up to NAME, then flags after it up to the command.
		if err = f.Parse(args); err != nil {
			return "", nil, err
		}
		if rest := f.Args(); len(rest) > 0 {
			pos = rest[:1]
			if err = f.Parse(rest[1:]); err != nil {
				return "", nil, err
			}
			cmd = f.Args()
		}
	}
	switch {
	case len(pos) == 0:
		return "", nil, errors.New("missing argument: want NAME -- COMMAND [ARG...]")
	case len(cmd) == 0 || cmd[0] == "":
		return "", nil, errors.New("missing command: want NAME -- COMMAND [ARG...]")
	}
	return pos[0], cmd, nil
}
