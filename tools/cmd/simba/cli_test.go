package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestBadUsageExitsTwoWithOneLine(t *testing.T) {
	tests := []struct {
		give []string
		want string // in the error line
	}{
		{nil, "missing command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"--bogus"}, "flag --bogus given before the command"},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"lock"}, "missing argument"},
		{[]string{"lock", "--backend", "memory://", "job"}, "missing command"},
		{[]string{"lock", "--backend", "memory://", "job", "--"}, "missing command"},
		{[]string{"lock", "--nosuchflag", "job", "--", "true"}, "flag provided but not defined: --nosuchflag ("},
		{[]string{"lock", "-nosuchflag", "job", "--", "true"}, "flag provided but not defined: --nosuchflag ("},
		{[]string{"lock", "--timeout", "soon", "job", "--", "true"}, `invalid value "soon" for flag --timeout: want a duration such as 30s`},
		{[]string{"lock", "-timeout=soon", "job", "--", "true"}, `invalid value "soon" for flag --timeout: want a duration such as 30s`},
		{[]string{"lock", "--verbose=maybe", "job", "--", "true"}, `invalid boolean value "maybe" for flag --verbose: parse error`},
		{[]string{"lock", "job", "--timeout"}, "flag needs an argument: --timeout ("},
		{[]string{"status", "--format"}, "flag needs an argument: --format ("},
		{[]string{"demo", "--nope"}, "flag provided but not defined: --nope ("},
		{[]string{"lock", "--backend", "memory:", "job", "--", "true"}, `backend URL "memory:": missing "//" after "memory:": want memory://[NAME]`},
		{[]string{"lock", "--backend", "redis:localhost:6379", "job", "--", "true"}, `missing "//" after "redis:"`},
		{[]string{"lock", "--backend", "redis://localhost:99999", "job", "--", "true"}, `port "99999": want a number from 1 to 65535`},
		{[]string{"lock", "--backend", "rediss://u:s3cr3t@localhost:0/1", "job", "--", "true"}, `port "0": want a number from 1 to 65535`},
		{[]string{"lock", "--backend", "redis://bad!host:6379", "job", "--", "true"}, `host "bad!host": not a host name or IP address`},
		{[]string{"lock", "--backend", "redis://10.0.0.300:6379", "job", "--", "true"}, `host "10.0.0.300"`},
		{[]string{"lock", "--backend", "postgres://u:s3cr3t@db:99999/app", "job", "--", "true"}, `port "99999"`},
		{[]string{"lock", "--backend", "postgres://u:s3cr3t@db1:5432,db2:65536/app", "job", "--", "true"}, `port "65536"`},
		{[]string{"lock", "--backend", "postgresql://u:s3cr3t@db_!/app", "job", "--", "true"}, `host "db_!"`},
		{[]string{"lock", "--backend", "mysql://u:s3cr3t@db:70000/app", "job", "--", "true"}, `port "70000"`},
		{[]string{"lock", "--backend", "mysql://u:s3cr3t@db..x:3306/app", "job", "--", "true"}, `host "db..x"`},
		{[]string{"leader", "--backend", "zk://zk1:2181,zk2:99999", "job", "--", "true"}, `server "zk2:99999": port "99999"`},
		{[]string{"leader", "--backend", "zk://u:s3cr3t@zk 1:2181", "job", "--", "true"}, `host "zk 1"`},
		{[]string{"status", "--backend", "redis://localhost:65536"}, `port "65536"`},
		{[]string{"lock", "--timeout", "-1s", "--backend", "memory://", "job", "--", "true"}, "must not be negative"},
		{[]string{"lock", "--backend", "memory://", "bad name", "--", "true"}, `invalid lease name "bad name"`},
		{[]string{"lock", "--backend", "memory://", "a", "b", "--", "true"}, `unexpected argument "b" before --`},
		{[]string{"lock", "job", "--", "true"}, "no backend: give --backend URL or set SIMBA_BACKEND"},
		{[]string{"lock", "--backend", "nope://x", "job", "--", "true"}, `unknown backend scheme "nope"`},
		{[]string{"lock", "--backend", "localhost:6379", "job", "--", "true"}, "has no scheme"},
		{[]string{"lock", "--backend", "memory://x/y", "job", "--", "true"}, "memory: invalid URL: want memory://NAME"},
		{[]string{"lock", "--backend", "memory://", "--lease", "10ms", "job", "--", "true"}, "--lease 10ms"},
		{[]string{"lock", "--backend", "memory://", "--lease", "-1s", "job", "--", "true"}, "must be positive"},
		{[]string{"lock", "--backend", "redis://:s3cr3t@[::1", "job", "--", "true"}, "missing ']' in host"},
		{[]string{"lock", "--backend", "redis://u:s3cr3t@host:port/x", "job", "--", "true"}, `invalid port ":port" after host`},
		{[]string{"lock", "--backend", "redis://u:s3cr3t@host/x", "job", "--", "true"}, "simbaredis: invalid options"},
		{[]string{"lock", "--backend", "postgres://u:s3cr3t@host:notaport/db", "job", "--", "true"}, "simbapg: url"},
		{[]string{"lock", "--backend", "postgres://u:s3@cr3t@host/db", "job", "--", "true"}, "may end at more than one '@'"},
		{[]string{"lock", "--backend", "postgres://u:s3cr3t@host/db?connect_timeout=soon", "job", "--", "true"}, "simbapg: url"},
		{[]string{"lock", "--backend", "postgres://u@host/db?password=s3cr3t&connect_timeout=soon", "job", "--", "true"}, "simbapg: url"},
		{[]string{"lock", "--backend", "redis://u:s3/cr3t@host/0", "job", "--", "true"}, "a '/' in the user information must be percent-encoded, as %2F"},
		{[]string{"lock", "--backend", "redis://u:s3cr3t%zz@host/0", "job", "--", "true"}, "invalid percent-escape"},
		{[]string{"lock", "--backend", "mysql://u:s3cr3t@host/", "job", "--", "true"}, "no database name"},
		{[]string{"lock", "--backend", "zk://", "job", "--", "true"}, "names no server"},
		{[]string{"lock", "--backend", "zk://u:s3cr3t@host", "job", "--", "true"}, "want HOST:PORT"},
		{[]string{"lock", "--backend", "zk://host:2181?x=1", "job", "--", "true"}, "query parameters are not supported"},
		{[]string{"leader"}, "missing argument"},
		{[]string{"leader", "--backend", "memory://", "job"}, "missing command"},
		{[]string{"leader", "--grace", "-1s", "--backend", "memory://", "job", "--", "true"}, "must not be negative"},
		{[]string{"status", "extra"}, `unexpected argument "extra"`},
		{[]string{"status", "--backend", "memory://", "--format", "xml"}, `--format "xml"`},
		{[]string{"status", "--backend", "memory://", "--timeout", "0s"}, "must be positive"},
		{[]string{"status"}, "no backend"},
		// Lease names are checked before the backend is contacted: this
		// one cannot be reached.
		{[]string{"status", "--backend", "redis://127.0.0.1:1/0", "--holder", "ok,bad name"}, `invalid value "ok,bad name" for flag --holder: simba: invalid lease name "bad name"`},
		{[]string{"status", "--backend", "redis://127.0.0.1:1/0", "--holder", ""}, `invalid lease name "": empty`},
		{[]string{"status", "--backend", "redis://127.0.0.1:1/0", "--holder", "a,,b"}, `invalid lease name "": empty`},
		{[]string{"status", "--holder"}, "flag needs an argument: --holder ("},
		{[]string{"status", "--backend", "redis://127.0.0.1:1/0", "--identity="}, `invalid value "" for flag --identity: empty`},
		{[]string{"lock", "--backend", "redis://127.0.0.1:1/0", "--identity", "a\nb", "job", "--", "true"}, `invalid value "a\nb" for flag --identity: the unprintable character U+000A at byte 1`},
		{[]string{"leader", "--backend", "redis://127.0.0.1:1/0", "--identity", strings.Repeat("x", 257), "job", "--", "true"}, "257 bytes, at most 256 allowed"},
		{[]string{"version", "now"}, `unexpected argument "now"`},
		{[]string{"demo", "--duration", "1s"}, "at least 5 times --lease"},
		{[]string{"demo", "--lease", "1ms"}, "--lease 1ms"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.give, " "), func(t *testing.T) {
			r := runSimba(t, tt.give...)
			if r.code != exitUsage {
				t.Errorf("exit code %d, want %d; stderr: %s", r.code, exitUsage, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
				t.Errorf("stderr is not one line: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tt.want)
			}
			if !strings.HasPrefix(r.stderr, "simba") {
				t.Errorf("stderr %q does not start with the program name", r.stderr)
			}
			if strings.Contains(r.stderr, "s3cr3t") {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
		})
	}
}

func TestHelpOfEveryCommand(t *testing.T) {
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				r := runSimba(t, args...)
				if r.code != exitOK || r.stderr != "" {
					t.Fatalf("exit code %d, stderr %q; want 0 and nothing", r.code, r.stderr)
				}
				if !strings.HasPrefix(r.stdout, "Usage:\n  simba "+c.name) {
					t.Errorf("help does not start with the usage line:\n%s", r.stdout)
				}
			})
		}
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := runSimba(t, args...)
		if r.code != exitOK {
			t.Fatalf("%v: exit code %d", args, r.code)
		}
		for _, c := range commands {
			if !strings.Contains(r.stdout, "\n  "+c.name+" ") {
				t.Errorf("%v: the overview does not list %s:\n%s", args, c.name, r.stdout)
			}
		}
	}
}

func TestHelpListsFlagsAndExitCodes(t *testing.T) {
	r := runSimba(t, "lock", "--help")
	for _, want := range []string{"--backend URL", "--timeout duration", "--grace duration", "(default: the safety gap", "SIMBA_TOKEN",
		"69               the backend cannot be reached", "75               the lock is held elsewhere", "76", "78               the backend is not set up", "127", "memory:// the lock lives in this simba process only"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("lock --help does not mention %q:\n%s", want, r.stdout)
		}
	}
}

func TestHelpDocumentsHoldersAndIdentity(t *testing.T) {
	for _, cmd := range []string{"lock", "leader", "status"} {
		r := runSimba(t, cmd, "--help")
		if !strings.Contains(r.stdout, "--identity ID") || !strings.Contains(r.stdout, "(default: HOST:PID)") {
			t.Errorf("%s --help does not document --identity:\n%s", cmd, r.stdout)
		}
	}
	r := runSimba(t, "status", "--help")
	for _, want := range []string{"Usage:\n  simba status [flags] [--holder NAME]...", "--holder NAME", "A lease nobody holds shows\nas free", `"holders"`,
		"--holder on a backend that cannot tell who holds a lease"} {
		if !strings.Contains(r.stdout, want) && !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), want) {
			t.Errorf("status --help does not mention %q:\n%s", want, r.stdout)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runSimba(t, args...)
		if r.code != exitOK {
			t.Fatalf("%v: exit code %d, stderr %q", args, r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "simba ") || !strings.Contains(lines[0], "go1.") {
			t.Errorf("%v: unexpected output %q", args, r.stdout)
		}
		for _, scheme := range []string{"memory://", "redis://", "rediss://", "postgres://", "mysql://", "zk://"} {
			if !strings.Contains(lines[len(lines)-1], scheme) {
				t.Errorf("%v: %s missing from %q", args, scheme, lines[len(lines)-1])
			}
		}
	}
}

func TestParseCommandLine(t *testing.T) {
	tests := []struct {
		give        []string
		wantName    string
		wantCmd     []string
		wantTimeout string
		wantErr     string
	}{
		{give: []string{"job", "--", "ls", "-l"}, wantName: "job", wantCmd: []string{"ls", "-l"}, wantTimeout: "0s"},
		{give: []string{"--timeout", "1s", "job", "--", "ls"}, wantName: "job", wantCmd: []string{"ls"}, wantTimeout: "1s"},
		{give: []string{"job", "--timeout=2s", "--", "ls"}, wantName: "job", wantCmd: []string{"ls"}, wantTimeout: "2s"},
		{give: []string{"job", "--", "sh", "-c", "x", "--", "y"}, wantName: "job", wantCmd: []string{"sh", "-c", "x", "--", "y"}, wantTimeout: "0s"},
		{give: []string{"job", "ls", "-l"}, wantName: "job", wantCmd: []string{"ls", "-l"}, wantTimeout: "0s"},
		{give: []string{"job", "--timeout", "3s", "ls", "--timeout", "9"}, wantName: "job", wantCmd: []string{"ls", "--timeout", "9"}, wantTimeout: "3s"},
		{give: []string{"--", "ls"}, wantErr: "missing argument"},
		{give: []string{"job"}, wantErr: "missing command"},
		{give: []string{}, wantErr: "missing argument"},
		{give: []string{"a", "b", "--", "ls"}, wantErr: "unexpected argument"},
		{give: []string{"job", "--", ""}, wantErr: "missing command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.give, " "), func(t *testing.T) {
			f := newFlags("lock", "", "")
			timeout := f.Duration("timeout", 0, "")
			name, cmd, err := f.parseCommandLine(tt.give)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != tt.wantName || !slices.Equal(cmd, tt.wantCmd) || timeout.String() != tt.wantTimeout {
				t.Errorf("got %q %q timeout %v, want %q %q timeout %v", name, cmd, *timeout, tt.wantName, tt.wantCmd, tt.wantTimeout)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct{ give, want string }{
		{"plain", "plain"},
		{"failed to connect:\n\thost a: refused\n\thost b: refused\n", "failed to connect: host a: refused; host b: refused"},
		{"a\n\nb", "a; b"},
	}
	for _, tt := range tests {
		if got := oneLine(tt.give); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestInterruptedCode(t *testing.T) {
	tests := []struct {
		give error
		want int
	}{
		{signalError{syscall.SIGTERM}, 143},
		{signalError{syscall.SIGINT}, 130},
		{errors.New("test ends"), 130},
		{nil, 130},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(tt.give)
		if got := interruptedCode(ctx); got != tt.want {
			t.Errorf("cause %v: exit code %d, want %d", tt.give, got, tt.want)
		}
	}
}

func TestSignalContextCancelsWithTheSignal(t *testing.T) {
	ctx, stop := signalContext(t.Context())
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	if got := interruptedCode(ctx); got != 143 {
		t.Errorf("exit code %d after SIGTERM, want 143", got)
	}
}

// TestHelpListsTablePrefixAsBadUsage: the help of every command that
// opens a backend lists an empty --table-prefix, and --table-prefix on a
// backend without tables, under exit code 2, as the README and the package
// doc do.
func TestHelpListsTablePrefixAsBadUsage(t *testing.T) {
	for _, cmd := range []string{"lock", "leader", "status"} {
		r := runSimba(t, cmd, "--help")
		_, codes, _ := strings.Cut(r.stdout, "Exit codes:")
		usage, _, _ := strings.Cut(codes, "\n  69")
		for _, want := range []string{"an empty --table-prefix", "--table-prefix on a backend without tables"} {
			if !strings.Contains(strings.Join(strings.Fields(usage), " "), want) {
				t.Errorf("%s --help does not list %s under 2:\n%s", cmd, want, codes)
			}
		}
	}
}
