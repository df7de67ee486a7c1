package simbapg

import (
	"context"
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

// TestOpenHidesCredentialsInEveryForm: a credential pgx accepts, in the
// user information, in the password or sslpassword parameter, in a
// keyword/value string or in Options.Password, shows nowhere: not in the
// error of Open or of simba.OpenBackend, nor in any error of its chain, in
// any fmt verb, nor in the backend's log, whether the URL is unusable, the
// server unreachable, the credentials refused or the tables missing.
func TestOpenHidesCredentialsInEveryForm(t *testing.T) {
	const s = backendtest.Secret
	u := parseURL(t, backendtest.ServerEnv(t, "SIMBA_TEST_POSTGRES_URL"))
	realHost, realUser := u.Host, u.User.Username()
	forms := []struct {
		name     string
		userinfo string // USER stands for the user name
		query    string
		pass     bool // the secret is in Options.Password
	}{
		{"userinfo password", "USER:" + s, "", false},
		{"password parameter", "USER", "password=" + s, false},
		{"encoded password parameter", "USER", "password=" + url.QueryEscape(s+"&x= y"), false},
		{"sslpassword parameter", "USER", "sslpassword=" + s, false},
		{"user and password parameters", "", "user=USER&password=" + s, false},
		{"Password parameter", "USER", "Password=" + s, false},
		{"Options.Password", "USER", "", true},
	}
	cases := []struct {
		name, host, user, query string
		prefix                  string
	}{
		{"bad option", realHost, "simba_no_such_user", "sslmode=bogus", ""},
		{"unreachable", "127.0.0.1:1", "simba_no_such_user", "sslmode=disable&connect_timeout=2", ""},
		{"refused", realHost, "simba_no_such_user", "sslmode=disable", ""},
		// The test server trusts its users: the password is not checked.
		{"tables missing", realHost, realUser, "sslmode=disable", "simba_sf_missing_"},
	}
	for _, c := range cases {
		for _, f := range forms {
			t.Run(c.name+"/"+f.name, func(t *testing.T) {
				userinfo := strings.ReplaceAll(f.userinfo, "USER", c.user)
				if userinfo != "" {
					userinfo += "@"
				}
				raw := "postgres://" + userinfo + c.host + "/postgres"
				if q := strings.Trim(c.query+"&"+strings.ReplaceAll(f.query, "USER", c.user), "&"); q != "" {
					raw += "?" + q
				}
				var logs backendtest.LogBuffer
				opts := Options{TablePrefix: c.prefix, Logger: logs.Logger()}
				if f.pass {
					opts.Password = s
				}
				backendtest.OpenFailsHiding(t, fmt.Sprintf("Open(%q)", raw), 5*time.Second,
					func(ctx context.Context) (io.Closer, error) { return Open(ctx, raw, opts) }, s)
				if !f.pass && c.prefix == "" {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					ob, err := simba.OpenBackend(ctx, raw)
					cancel()
					if err == nil {
						_ = ob.Close()
					}
					backendtest.NoSecret(t, fmt.Sprintf("simba.OpenBackend(%q)", raw), err, s)
				}
				backendtest.NoSecretIn(t, fmt.Sprintf("Open(%q): the log", raw), logs.String(), s)
			})
		}
	}
	// A keyword/value string is refused without being quoted.
	_, err := Open(context.Background(), "host=127.0.0.1 port=1 user=u password="+s+" dbname=db", Options{})
	if err == nil || strings.Contains(backendtest.ErrorTexts(err), s) {
		t.Errorf("keyword/value string: %v", err)
	}
}

// TestOptionsPrintWithoutPassword: Options printed with any fmt verb, as a
// value or a pointer, or logged with slog, never shows Password.
func TestOptionsPrintWithoutPassword(t *testing.T) {
	o := Options{TablePrefix: "app_", Password: backendtest.Secret}
	backendtest.PrintsWithoutSecret(t, o, &o, backendtest.Secret, "app_")
}

// TestOpenKeepsTextThatIsNoCredential: a parameter that only names how to
// authenticate (require_auth=md5) is no credential, and a short value of
// one that is (x_auth=1) is not searched for in the driver's message: the
// server's address reads as it is.
func TestOpenKeepsTextThatIsNoCredential(t *testing.T) {
	u := parseURL(t, backendtest.ServerEnv(t, "SIMBA_TEST_POSTGRES_URL"))
	for _, host := range []string{u.Host, "127.0.0.1:1"} {
		for _, param := range []string{"x_auth=1", "require_auth=md5", "x_token=5432"} {
			raw := "postgres://simba_no_such_user@" + host + "/postgres?sslmode=disable&connect_timeout=2&" + param
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			b, err := Open(ctx, raw, Options{Logger: slog.New(slog.DiscardHandler)})
			cancel()
			if err == nil {
				_ = b.Close()
				t.Fatalf("Open(%q) succeeded", raw)
			}
			if msg := err.Error(); !strings.Contains(msg, host) || strings.Contains(msg, "xxxxx") {
				t.Errorf("Open(%q) = %q, want the address %s as it is and nothing masked", raw, msg, host)
			}
		}
	}
}

// TestOpenParseErrorPrintsTheURLStructurally: the URL pgx quotes when it
// cannot parse a parameter is printed with every credential's value
// masked, however short, and every other byte as written.
func TestOpenParseErrorPrintsTheURLStructurally(t *testing.T) {
	raw := "postgres://u:pw@127.0.0.1:1/db?x_auth=ab&require_auth=md5&connect_timeout=bogus"
	_, err := Open(context.Background(), raw, Options{Logger: slog.New(slog.DiscardHandler)})
	want := "cannot parse `postgres://u:xxxxx@127.0.0.1:1/db?x_auth=xxxxx&require_auth=md5&connect_timeout=bogus`: "
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open(%q) = %v, want it to say %q", raw, err, want)
	}
}

// TestOpenParseErrorQuotesNoCredentialInAValue: a URL that pgx cannot
// parse and that holds a credential as key=value inside another part (the
// value of sslmode in "sslmode=disable password=abc12", as written or
// percent-encoded), or a '`', is not quoted: backendkit.RedactURL would
// print that credential as written, and backendkit.MaskText does not look
// for a short or numeric one. The error still says why.
func TestOpenParseErrorQuotesNoCredentialInAValue(t *testing.T) {
	const base = "postgres://u@127.0.0.1:1/db?"
	tests := []struct {
		give, secret, want string
	}{
		{give: base + "sslmode=disable password=abc12", secret: "abc12", want: "failed to parse as URL"},
		{give: base + "sslmode=disable password=98761", secret: "98761", want: "failed to parse as URL"},
		{give: base + "sslmode=disable%20password%3Dq7", secret: "q7", want: "sslmode is invalid"},
		{give: base + "application_name=a%20pwd=zq9&connect_timeout=bogus", secret: "zq9", want: `parameter: "application_name"`},
		{give: base + "x_auth=zz&application_name=`&connect_timeout=bogus", secret: "zz", want: "connect_timeout"},
	}
	for _, tt := range tests {
		_, err := Open(context.Background(), tt.give, Options{Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "cannot parse the URL: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want a parse error that quotes no URL and says %q", tt.give, err, tt.want)
		}
		backendtest.NoSecret(t, fmt.Sprintf("Open(%q)", tt.give), err, tt.secret)
	}
}
