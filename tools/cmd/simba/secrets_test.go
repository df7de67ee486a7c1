package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendkit"
)

// secretPasswords hold the characters that end a part of a URL, or start
// an escape, written as they are. Their pieces between those characters
// are distinct, so that a piece found in a message shows a leak.
var secretPasswords = []string{
	"Qx7k#Wm4z",
	"Qx7k/Wm4z",
	"Qx7k?Wm4z",
	"Qx7k@Wm4z",
	"Qx7k%Wm4z",
	"Qx7k%41Wm4z",
	"Qx7k:Wm4z",
	"Qx7k#Wm4z/Pt2r?Lb6n@Hc3y%Jd5s:Rf8g&Vn9q",
}

// secretURLs are backend URLs of every scheme simba accepts, and a DSN
// without one; %s is the password. The servers do not exist.
var secretURLs = []string{
	"memory://user:%s@store",
	"redis://user:%s@127.0.0.1:1/0",
	"rediss://:%s@127.0.0.1:1",
	"postgres://user:%s@127.0.0.1:1/db?sslmode=disable",
	"postgresql://user:%s@127.0.0.1:1/db",
	"postgres://user@127.0.0.1:1/db?password=%s&sslmode=disable",
	// pgx decodes a parameter's name: these too are its password.
	"postgres://user@127.0.0.1:1/db?sslmode=disable&pass%%77ord=%s",
	"postgres://user@127.0.0.1:1/db?%%50ASSWORD=%s&sslmode=disable",
	"postgresql://user@127.0.0.1:1/db?sslpass%%77ord=%s",
	"mysql://user:%s@127.0.0.1:1/db",
	"zk://user:%s@127.0.0.1:1,127.0.0.1:2/chroot",
	"user:%s@tcp(127.0.0.1:1)/db",
}

// secretNeedles are what must not appear in a message about a URL holding
// the password written as written: the password, as written and decoded,
// and every piece of four bytes or more between the characters of
// secretPasswords.
func secretNeedles(written string) []string {
	all := []string{written}
	if d, err := url.QueryUnescape(written); err == nil {
		all = append(all, d)
	}
	var needles []string
	for _, s := range all {
		needles = append(needles, s)
		for _, piece := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("#/?@%:&", r) }) {
			if len(piece) >= 4 {
				needles = append(needles, piece)
			}
		}
	}
	return needles
}

// secretCase is one URL with one password, written as is or encoded.
type secretCase struct {
	name, url string
	needles   []string
}

func secretCases() []secretCase {
	var cases []secretCase
	for _, tmpl := range secretURLs {
		for _, pw := range secretPasswords {
			for _, written := range []string{pw, url.QueryEscape(pw)} {
				cases = append(cases, secretCase{
					name:    fmt.Sprintf(tmpl, written),
					url:     fmt.Sprintf(tmpl, written),
					needles: secretNeedles(written),
				})
			}
		}
	}
	return cases
}

// leaked returns the needles found in text.
func leaked(text string, needles []string) []string {
	var found []string
	for _, n := range needles {
		if strings.Contains(text, n) {
			found = append(found, n)
		}
	}
	return found
}

// TestRedactURLHidesPasswordsWithDelimiters: a password holding '#', '/',
// '?', '@', '%' or ':' is hidden whole, never cut at that character.
func TestRedactURLHidesPasswordsWithDelimiters(t *testing.T) {
	for _, c := range secretCases() {
		got := redactURL(c.url)
		if found := leaked(got, c.needles); len(found) > 0 {
			t.Errorf("redactURL(%q) = %q shows %q", c.url, got, found)
		}
		if !strings.Contains(got, "xxxxx") {
			t.Errorf("redactURL(%q) = %q redacts nothing", c.url, got)
		}
	}
}

// TestRedactURLKeepsWhatIsNotSecret: what the drivers read unambiguously
// stays readable.
func TestRedactURLKeepsWhatIsNotSecret(t *testing.T) {
	tests := []struct{ give, want string }{
		{"redis://user:pa@ss@host:6379/0", "redis://user:xxxxx@host:6379/0"},
		{"redis://user:pa:ss@host/0?dial_timeout=1s", "redis://user:xxxxx@host/0?dial_timeout=1s"},
		{"redis://user:pa/ss@host/0", "redis://xxxxx@host/0"},
		{"redis://u:p#w@h/0", "redis://xxxxx@h/0"},
		{"postgres://u:p#w?x@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:pa@ss@h/db", "postgres://xxxxx@h/db"},
		{"postgres://app@db/app?options=a@b", "postgres://xxxxx@b"},
		{"postgres://app@db/app?sslmode=require&password=s3cr3t#x", "postgres://app@db/app?sslmode=require&password=xxxxx"},
		{"postgres://app@db/app?sslmode=require&pass%77ord=s3cr3t", "postgres://app@db/app?sslmode=require&pass%77ord=xxxxx"},
		{"postgres://app@db/app?%50ASSWORD=s3cr3t&sslmode=require", "postgres://app@db/app?%50ASSWORD=xxxxx"},
		{"postgres://app@db/app?pass%zzord=s3cr3t", "postgres://app@db/app?pass%zzord=xxxxx"},
		{"postgres://app@db/app?sslmode%3Drequire", "postgres://app@db/app?sslmode%3Drequire"},
		{"mysql://user:pa@ss@tcp(h:3306)/db", "mysql://user:xxxxx@tcp(h:3306)/db"},
		{"user:pa@ss@tcp(h:3306)/db", "xxxxx@tcp(h:3306)/db"},
		{"host=db password=s3cr3t user=app", "host=db password=xxxxx"},
		{"zk://user:pw@h1:2181,h2:2181/chroot", "zk://user:xxxxx@h1:2181,h2:2181/chroot"},
		{"zk://user:p/w?x#y@h1:2181/chroot", "zk://user:xxxxx@h1:2181/chroot"},
		{"zk://h1:2181/chroot", "zk://h1:2181/chroot"},
		{"u:p@h://x", "xxxxx@h://x"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.give); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// TestErrorsNeverShowThePassword runs simba status on URLs of unreachable
// servers, with the debug records on: neither an error nor a log line
// shows the password or a piece of it.
func TestErrorsNeverShowThePassword(t *testing.T) {
	cases := secretCases()
	type outcome struct {
		code   int
		stderr string
	}
	outcomes := make([]outcome, len(cases))
	// The runs wait for their connect timeout: run them side by side.
	var wg sync.WaitGroup
	limit := make(chan struct{}, 24)
	for i, c := range cases {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			var stdout, stderr syncBuffer
			a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			code := a.run(ctx, []string{"status", "--backend", c.url, "--verbose", "--connect-timeout", "300ms", "--timeout", "300ms"})
			outcomes[i] = outcome{code, stdout.String() + stderr.String()}
		})
	}
	wg.Wait()
	for i, c := range cases {
		o := outcomes[i]
		if o.code != exitUsage && o.code != exitUnavailable {
			t.Errorf("%s: exit code %d, want %d or %d; output:\n%s", c.name, o.code, exitUsage, exitUnavailable, o.stderr)
		}
		if found := leaked(o.stderr, c.needles); len(found) > 0 {
			t.Errorf("%s: the output shows %q:\n%s", c.name, found, o.stderr)
		}
	}
}

// TestCommandGetsNoSimbaVariables: the command does not inherit
// SIMBA_BACKEND, which may hold a password, nor any other variable of
// simba but the lease name and the token.
func TestCommandGetsNoSimbaVariables(t *testing.T) {
	t.Setenv(backendEnv, "redis://user:Qx7kWm4z@127.0.0.1:1/0")
	t.Setenv("SIMBA_PASSWORD", "Qx7kWm4z")
	t.Setenv("Simba_Mixed_Case", "Qx7kWm4z")
	t.Setenv("CLITEST_KEPT", "kept")
	for _, cmd := range []string{"lock", "leader"} {
		r := runSimba(t, append([]string{cmd, "--backend", memoryURL(t), "job", "--"}, helper(t, "environ")...)...)
		if r.code != 0 {
			t.Fatalf("%s: exit code %d, stderr %q", cmd, r.code, r.stderr)
		}
		if want := "CLITEST_KEPT=kept\nSIMBA_LEASE=job\nSIMBA_TOKEN="; !strings.HasPrefix(r.stdout, want) || strings.Count(r.stdout, "\n") != 3 {
			t.Errorf("%s: the command's environment holds\n%s\nwant only\n%s...", cmd, r.stdout, want)
		}
	}
}

// TestListErrorsMaskedKeepTheChain: the errors that --holder and --list
// print to standard output are masked (backendkit.MaskError) as stderr's
// are, and still match what they wrap.
func TestListErrorsMaskedKeepTheChain(t *testing.T) {
	err := fmt.Errorf("dial redis://u:hunter2@h: %w", simba.ErrBackendUnavailable)
	got := backendkit.MaskError(err, []string{"hunter2"})
	if strings.Contains(got.Error(), "hunter2") {
		t.Errorf("MaskError kept the secret: %v", got)
	}
	if !errors.Is(got, simba.ErrBackendUnavailable) {
		t.Errorf("MaskError(%v) no longer matches simba.ErrBackendUnavailable", got)
	}
	if backendkit.MaskError(nil, []string{"hunter2"}) != nil {
		t.Error("MaskError(nil) is not nil")
	}
}
