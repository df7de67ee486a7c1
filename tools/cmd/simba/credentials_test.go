package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/core/backendkit"
)

// credentialSecret is the credential of the tests of this file.
const credentialSecret = "Zq7SecretVw3Ky"

// credentialKeys are the parameters that may hold a credential, in the
// spellings the drivers and their users write.
var credentialKeys = []string{
	"password", "Password", "PASSWORD", "pass", "passwd", "pwd", "sslpassword", "sentinel_password",
	"sentinelPassword", "sentinel-password", "requirepass", "auth_token", "client_secret", "auth", "x_auth",
	"api_key", "access_token",
	// Percent-encoded, as the drivers decode them.
	"pass%77ord", "%50ASSWORD", "sslpass%77ord", "pass%57ord",
}

// credentialURLs are backend URLs, and a DSN and a keyword/value string,
// of servers that do not exist; KEY is the parameter's name.
var credentialURLs = []string{
	"redis://127.0.0.1:1/0?KEY=" + credentialSecret,
	"redis://127.0.0.1:1/0?protocol=9&KEY=" + credentialSecret,
	"redis://127.0.0.1:1/0?KEY=" + credentialSecret + "&protocol=9",
	"rediss://127.0.0.1:1?KEY=" + credentialSecret,
	"postgres://u@127.0.0.1:1/db?KEY=" + credentialSecret + "&sslmode=disable",
	"postgresql://u@127.0.0.1:1/db?sslmode=disable&KEY=" + credentialSecret,
	"mysql://u@127.0.0.1:1/db?KEY=" + credentialSecret,
	"u@tcp(127.0.0.1:1)/db?KEY=" + credentialSecret,
	"host=127.0.0.1 port=1 KEY=" + credentialSecret + " dbname=db",
}

func credentialCases() []secretCase {
	var cases []secretCase
	for _, tmpl := range credentialURLs {
		for _, key := range credentialKeys {
			u := strings.Replace(tmpl, "KEY", key, 1)
			cases = append(cases, secretCase{name: u, url: u, needles: []string{credentialSecret}})
		}
	}
	return cases
}

// TestRedactURLHidesEveryCredentialParameter: the value of every
// parameter that may hold a credential is hidden, whatever its spelling.
func TestRedactURLHidesEveryCredentialParameter(t *testing.T) {
	for _, c := range credentialCases() {
		if got := redactURL(c.url); strings.Contains(got, credentialSecret) {
			t.Errorf("redactURL(%q) = %q", c.url, got)
		}
		if !strings.Contains(strings.Join(parseBackendURL(c.url).secretStrings(), "\n"), credentialSecret) {
			t.Errorf("%q: the secret is not scrubbed from messages", c.url)
		}
	}
	// What is not a credential stays readable.
	for give, want := range map[string]string{
		"redis://h:6379/0?dial_timeout=1s&protocol=3":          "redis://h:6379/0?dial_timeout=1s&protocol=3",
		"postgres://u@h/db?sslmode=disable&application_name=x": "postgres://u@h/db?sslmode=disable&application_name=x",
		"mysql://u@h/db?validate_password.policy=LOW":          "mysql://u@h/db?validate_password.policy=LOW",
	} {
		if got := redactURL(give); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", give, got, want)
		}
	}
}

// TestCredentialParametersShowInNoOutput runs simba status and simba lock
// on URLs of unreachable servers with a credential in a parameter, with
// the debug records on: no line of theirs shows it.
func TestCredentialParametersShowInNoOutput(t *testing.T) {
	cases := credentialCases()
	outputs := make([]string, 2*len(cases))
	codes := make([]int, 2*len(cases))
	var wg sync.WaitGroup
	limit := make(chan struct{}, 24)
	for i, c := range cases {
		for j, args := range [][]string{
			{"status", "--backend", c.url, "--verbose", "--connect-timeout", "300ms", "--timeout", "300ms"},
			{"lock", "--backend", c.url, "--verbose", "--connect-timeout", "300ms", "--timeout", "300ms", "job", "--", "true"},
		} {
			wg.Go(func() {
				limit <- struct{}{}
				defer func() { <-limit }()
				var stdout, stderr syncBuffer
				a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				codes[2*i+j] = a.run(ctx, args)
				outputs[2*i+j] = stdout.String() + stderr.String()
			})
		}
	}
	wg.Wait()
	for i, out := range outputs {
		c := cases[i/2]
		if codes[i] != exitUsage && codes[i] != exitUnavailable {
			t.Errorf("%s: exit code %d; output:\n%s", c.name, codes[i], out)
		}
		if strings.Contains(out, credentialSecret) {
			t.Errorf("%s: the output shows the secret:\n%s", c.name, out)
		}
	}
}

// TestStatusShowsNoCredential: simba status on a live backend, whose
// report names the backend, shows no credential of its URL, in a table or
// in JSON.
func TestStatusShowsNoCredential(t *testing.T) {
	pg := serverURL(t, "SIMBA_TEST_POSTGRES_URL", func(v string) string { return v })
	zk := serverURL(t, "SIMBA_TEST_ZK_SERVERS", func(v string) string { return v })
	for _, url := range []string{
		// The test server trusts its users: the password is not checked.
		pg + "&password=" + credentialSecret,
		pg + "&sslpassword=" + credentialSecret,
		pg + "&pass%77ord=" + credentialSecret,
		pg + "&sslpass%77ord=" + credentialSecret,
		"zk://simba:" + credentialSecret + "@" + zk + "/simba-cli-test",
	} {
		for _, format := range []string{"table", "json"} {
			r := runSimba(t, "status", "--backend", url, "--migrate", "--format", format, "--verbose")
			if r.code != exitOK {
				t.Errorf("%s: exit code %d, stderr %q", url, r.code, r.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, credentialSecret) {
				t.Errorf("%s --format %s shows the secret:\n%s\n%s", url, format, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "xxxxx") {
				t.Errorf("%s --format %s: the backend is not shown redacted:\n%s", url, format, r.stdout)
			}
		}
	}
}

// TestSwitchesAboutCredentialsStayReadable: a parameter that only speaks
// of credentials (allowCleartextPasswords, require_auth, authSource) is
// printed as written, and a short or numeric value of one that names a
// credential is not scrubbed from messages, where it would mangle the
// addresses and ports.
func TestSwitchesAboutCredentialsStayReadable(t *testing.T) {
	for _, give := range []string{
		"mysql://root@127.0.0.1:1/simba_test?allowCleartextPasswords=1",
		"postgres://u@127.0.0.1:15432/db?require_auth=md5&sslmode=disable",
		"mysql://u@h/db?validate_password.policy=LOW&allowNativePasswords=true",
	} {
		if got := redactURL(give); got != give {
			t.Errorf("redactURL(%q) = %q, want it as it is", give, got)
		}
	}
	const msg = "dial tcp 127.0.0.1:15432: connect: connection refused"
	for _, raw := range []string{
		"postgres://u@127.0.0.1:15432/db?x_auth=1",
		"postgres://u@127.0.0.1:15432/db?x_token=5432",
		"mysql://root@127.0.0.1:1/simba_test?allowCleartextPasswords=1",
	} {
		if got := backendkit.MaskText(msg, parseBackendURL(raw).secretStrings()); got != msg {
			t.Errorf("%s: MaskText(%q) = %q, want it as it is", raw, msg, got)
		}
	}
}
