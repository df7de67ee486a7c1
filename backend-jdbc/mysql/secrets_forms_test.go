package simbamysql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// TestOpenHidesCredentialsInEveryForm: a credential in a mysql:// URL (user
// information, a password parameter in any case), in a go-sql-driver DSN
// (user:password@tcp(...)) or in Options.Password shows nowhere: not in
// the error of Open or of simba.OpenBackend, nor in any error of its chain,
// in any fmt verb, nor in the backend's log, whether the data source is
// unusable, the server unreachable or the credentials refused.
func TestOpenHidesCredentialsInEveryForm(t *testing.T) {
	const s = backendtest.Secret
	realHost := parseDSN(t, backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL")).Addr
	const user = "simba_no_such_user"
	forms := []struct {
		name string
		// build returns the data source for host and the extra query.
		build func(host, query string) string
		pass  bool // the secret is in Options.Password
		url   bool // a mysql:// URL, which simba.OpenBackend takes
	}{
		{"URL userinfo password", func(h, q string) string { return "mysql://" + user + ":" + s + "@" + h + "/simba_test" + q }, false, true},
		{"URL encoded userinfo password", func(h, q string) string {
			return "mysql://" + url.UserPassword(user, s+"@/:").String() + "@" + h + "/simba_test" + q
		}, false, true},
		{"URL password parameter", func(h, q string) string { return "mysql://" + user + "@" + h + "/simba_test" + join(q, "password="+s) }, false, true},
		{"URL Password parameter", func(h, q string) string { return "mysql://" + user + "@" + h + "/simba_test" + join(q, "Password="+s) }, false, true},
		{"URL Options.Password", func(h, q string) string { return "mysql://" + user + "@" + h + "/simba_test" + q }, true, true},
		{"DSN password", func(h, q string) string { return user + ":" + s + "@tcp(" + h + ")/simba_test" + q }, false, false},
		{"DSN password with @", func(h, q string) string { return user + ":" + s + "@x@tcp(" + h + ")/simba_test" + q }, false, false},
		{"DSN Options.Password", func(h, q string) string { return user + "@tcp(" + h + ")/simba_test" + q }, true, false},
	}
	cases := []struct {
		name, host, query string
	}{
		{"bad option", realHost, "?timeout=bogus"},
		{"unreachable", "127.0.0.1:1", "?timeout=2s"},
		{"refused", realHost, ""},
	}
	for _, c := range cases {
		for _, f := range forms {
			t.Run(c.name+"/"+f.name, func(t *testing.T) {
				raw := f.build(c.host, c.query)
				var logs backendtest.LogBuffer
				opts := Options{Logger: logs.Logger()}
				if f.pass {
					opts.Password = s
				}
				backendtest.OpenFailsHiding(t, fmt.Sprintf("Open(%q)", raw), 5*time.Second,
					func(ctx context.Context) (io.Closer, error) { return Open(ctx, raw, opts) }, s)
				if f.url && !f.pass {
					backendtest.OpenFailsHiding(t, fmt.Sprintf("simba.OpenBackend(%q)", raw), 5*time.Second,
						func(ctx context.Context) (io.Closer, error) { return simba.OpenBackend(ctx, raw) }, s)
				}
				backendtest.NoSecretIn(t, fmt.Sprintf("Open(%q): the log", raw), logs.String(), s)
			})
		}
	}
}

// join appends the parameter p to the query q ("" or "?...").
func join(q, p string) string {
	if q == "" {
		return "?" + p
	}
	return q + "&" + p
}

// TestOptionsPrintWithoutPassword: Options printed with any fmt verb, as a
// value or a pointer, or logged with slog, never shows Password.
func TestOptionsPrintWithoutPassword(t *testing.T) {
	o := Options{TablePrefix: "app_", Password: backendtest.Secret}
	backendtest.PrintsWithoutSecret(t, o, &o, backendtest.Secret, "app_")
}

// TestOpenRefusesPasswordParameter: go-sql-driver/mysql has no password
// parameter and would send one to the server as SET password=..., a
// statement that quotes the password in its error or changes the user's
// password: Open refuses it, in a URL and in a DSN, in any case, before
// any connection.
func TestOpenRefusesPasswordParameter(t *testing.T) {
	for _, raw := range []string{
		"mysql://simba@127.0.0.1:1/db?password=" + backendtest.Secret,
		"mysql://simba@127.0.0.1:1/db?timeout=1s&PASSWORD=" + backendtest.Secret,
		"simba@tcp(127.0.0.1:1)/db?password=" + backendtest.Secret,
		"simba@tcp(127.0.0.1:1)/db?Password='" + backendtest.Secret + "'",
	} {
		_, err := Open(context.Background(), raw, Options{})
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Options.Password") ||
			strings.Contains(backendtest.ErrorTexts(err), backendtest.Secret) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOptions pointing to Options.Password", raw, err)
		}
	}
	// A server variable whose name holds "password" is not refused.
	if _, _, err := config("simba@tcp(127.0.0.1:1)/db?validate_password.policy=LOW", Options{}); err != nil {
		t.Errorf("validate_password.policy: %v", err)
	}
}

// TestDSNSecrets: the credential parameters of a DSN are known secrets,
// masked wherever the driver's messages might quote them.
func TestDSNSecrets(t *testing.T) {
	got := strings.Join(dsnSecrets("u:p@tcp(h:1)/db?timeout=1s&auth_token="+backendtest.Secret+"&client_secret=a%20b"), " ")
	for _, want := range []string{backendtest.Secret, "a%20b", "a b"} {
		if !strings.Contains(got, want) {
			t.Errorf("dsnSecrets = %q, want %q among them", got, want)
		}
	}
	if s := dsnSecrets("u:p@tcp(h:1)/db"); len(s) != 0 {
		t.Errorf("dsnSecrets without a query = %q", s)
	}
}

// TestOpenKeepsTextThatIsNoCredential: a parameter that only speaks of
// passwords (allowCleartextPasswords, allowNativePasswords) is no
// credential, and a short value of one that is (x_auth=1) is not searched
// for in the driver's message: the address of an unreachable server reads
// as it is.
func TestOpenKeepsTextThatIsNoCredential(t *testing.T) {
	for _, raw := range []string{
		"mysql://root@127.0.0.1:1/simba_test?allowCleartextPasswords=1",
		"mysql://root@127.0.0.1:1/simba_test?allowNativePasswords=true",
		"mysql://root@127.0.0.1:1/simba_test?x_auth=1",
		"root@tcp(127.0.0.1:1)/simba_test?allowCleartextPasswords=1",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := Open(ctx, raw, Options{Logger: slog.New(slog.DiscardHandler)})
		cancel()
		if err == nil {
			_ = b.Close()
			t.Fatalf("Open(%q) succeeded", raw)
		}
		if msg := err.Error(); !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, "xxxxx") {
			t.Errorf("Open(%q) = %q, want the address 127.0.0.1:1 as it is and nothing masked", raw, msg)
		}
	}
}
