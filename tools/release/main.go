// Command release versions, checks and tags the modules of the Simba
// workspace, and proves that users can fetch them with `go get`.
//
// Every module of go.work is released at the same version, tagged per
// module directory (core/v0.1.0, backend-redis/v0.1.0, ...). Each go.mod
// names its sibling modules at that version, never at a pseudo-version;
// go.work (and, in the library modules, replace lines) resolve them to the
// working tree for local work.
//
// Usage, from the root of the repository:
//
//	go run ./tools/release -version v0.1.0        set the siblings' version in every go.mod, tidy, check, print the tags
//	go run ./tools/release -version v0.1.0 -check only check: no file is written
//	go run ./tools/release proxy -out DIR         write a file-system module proxy (GOPROXY=file://DIR) of the working tree
//	go run ./tools/release goget                  go get each backend from that proxy outside the workspace, go install simba
//	go run ./tools/release tidy [-check]          go mod tidy in every module (or check that it changes nothing)
//	go run ./tools/release min-go -go go1.25.14 MODULE...
//	                                              build and vet MODULE... with an older toolchain
//	go run ./tools/release versions               check the Go and dependency versions the documents name
//
// Without -version, a command uses the version every go.mod already names
// its siblings at. Run `go run ./tools/release help` for the flags of each
// command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// errUsage reports a command line that cannot be run; the usage has been
// printed already.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// commands maps a command name to its runner; the release itself is the
// command without a name.
var commands = map[string]func(ctx context.Context, args []string, out, errOut io.Writer) error{
	"proxy":    runProxy,
	"goget":    runGoget,
	"tidy":     runTidy,
	"min-go":   runMinGo,
	"versions": runVersions,
}

func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) > 0 {
		if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			fmt.Fprint(out, usage)
			return nil
		}
		if cmd, ok := commands[args[0]]; ok {
			return cmd(ctx, args[1:], out, errOut)
		}
	}
	return runRelease(ctx, args, out, errOut)
}

const usage = `Usage of release (run from the repository, with go.work above the current directory):

  release -version vX.Y.Z [-check] [-full] [-tag DIR/vX.Y.Z]
	Sets the version at which every go.mod requires its sibling modules,
	tidies the modules, builds and vets every module, runs make test-core
	(make test with -full), the go-get check and the tidy check, and prints
	the git tag commands, one tag per module directory. With -check nothing
	is written: the go.mod files must already name vX.Y.Z, and go.sum must
	hold the checksums of the siblings as they are now. -tag checks that a
	pushed tag names a module of the workspace at vX.Y.Z and points at HEAD.

  release proxy -out DIR [-version vX.Y.Z]
	Writes a file-system module proxy of every module of the workspace at
	vX.Y.Z, made from the working tree (files git ignores are left out).
	Use it with GOPROXY=file://DIR.

  release goget [-version vX.Y.Z] [-keep]
	Builds that proxy in a temporary directory and, in fresh modules outside
	the workspace, go gets each backend module alone, builds a program for
	it and checks with go version -m which drivers it links; then go
	installs the simba command at vX.Y.Z and runs "simba version".

  release tidy [-check]
	Runs go mod tidy in every module. A module that requires its siblings
	without replace lines resolves them through the proxy of the working
	tree; its go.sum keeps the checksums already recorded for the siblings.
	With -check, prints what tidy would change and fails if anything would.

  release min-go -go goX.Y.Z MODULE...
	Checks that each MODULE says "go X.Y.0" and builds and vets with the
	toolchain goX.Y.Z, in a temporary go.work holding only those modules.
	Prints "skipped" and succeeds when that toolchain cannot be downloaded.

  release versions
	Checks the versions the Markdown documents name (Go releases, the
	dependencies' and the tools' versions, the module table of
	CONTRIBUTING.md) against the go.mod files, go.work and the Makefile.
`

// newFlagSet returns a flag set that prints its errors and the usage to
// errOut.
func newFlagSet(name string, errOut io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprint(errOut, usage) }
	return fs
}

// parseFlags parses args and refuses positional arguments unless
// positional is true.
func parseFlags(fs *flag.FlagSet, args []string, positional bool) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !positional && fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "release %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return errUsage
	}
	return nil
}
