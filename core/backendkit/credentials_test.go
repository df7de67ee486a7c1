package backendkit_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/simba-go/simba/core/backendkit"
	"github.com/simba-go/simba/core/backendtest"
)

// secret is a credential no form of a URL changes and no message holds
// by chance.
const secret = "Zq7SecretVw3Ky"

func TestIsCredentialParam(t *testing.T) {
	credentials := []string{
		// The drivers' own and their spellings.
		"password", "Password", "PASSWORD", "sslpassword", "passwd", "pass", "pwd", "passphrase",
		// Redis deployments.
		"sentinel_password", "sentinelPassword", "sentinel-password", "requirepass", "masterauth", "auth",
		// Tokens and keys.
		"auth_token", "authToken", "access_token", "x_auth", "client_secret", "secrets", "oauth_bearer",
		"credential", "credentials", "api_key", "apiKey", "x-api-key", "secret_key", "private_key", "access.key",
	}
	for _, name := range credentials {
		if !backendkit.IsCredentialParam(name) {
			t.Errorf("IsCredentialParam(%q) = false, want true", name)
		}
	}
	flags := []string{
		// Switches and methods about credentials.
		"allowCleartextPasswords", "allowNativePasswords", "allowOldPasswords", "allow_password",
		"require_auth", "requireAuth", "enable_auth", "disable_token", "skip_auth", "cache_bypass",
		// A word of a credential elsewhere in the name.
		"authSource", "authsource", "authMechanism", "authMechanismProperties", "validate_password.policy",
		"passfile", "password_file", "token_ttl", "max_tokens", "secret_name",
		// Nothing to do with credentials.
		"sslmode", "user", "username", "dbname", "host", "tls", "timeout", "dial_timeout", "protocol", "",
	}
	for _, name := range flags {
		if backendkit.IsCredentialParam(name) {
			t.Errorf("IsCredentialParam(%q) = true, want false", name)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ give, want string }{
		// Only the credentials change, however short.
		{"redis://127.0.0.1:1/0?dial_timeout=1s&x_auth=1", "redis://127.0.0.1:1/0?dial_timeout=1s&x_auth=xxxxx"},
		{"mysql://root@127.0.0.1:1/db?allowCleartextPasswords=1", "mysql://root@127.0.0.1:1/db?allowCleartextPasswords=1"},
		{"postgres://u@h:5432/db?require_auth=md5&authSource=admin", "postgres://u@h:5432/db?require_auth=md5&authSource=admin"},
		{"redis://u:" + secret + "@h:6379/0?protocol=3", "redis://u:xxxxx@h:6379/0?protocol=3"},
		{"redis://:pw@h/0", "redis://:xxxxx@h/0"},
		{"redis://h/0?password=" + secret + "&protocol=9", "redis://h/0?password=xxxxx&protocol=9"},
		{"redis://h/0?Sentinel_Password=a%26b&x=%zz", "redis://h/0?Sentinel_Password=xxxxx&x=%zz"},
		{"redis://h/0?pass%77ord=pw", "redis://h/0?pass%77ord=xxxxx"},
		// A ';' does not end a credential's value.
		{"redis://h/0?a=1;password=ab;cd&b=2", "redis://h/0?a=1;password=xxxxx&b=2"},
		{"redis://h/0?Password=pw6;authToken=pw7", "redis://h/0?Password=xxxxx"},
		// An empty value, or none, shows that there is none.
		{"redis://h/0?password=&token", "redis://h/0?password=&token"},
		// The fragment is left out.
		{"redis://h/0?password=ab#cd", "redis://h/0?password=xxxxx"},
		{"redis://h/0#frag", "redis://h/0"},
		{"redis://h/0?&&x=1&", "redis://h/0?&&x=1&"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.give)
		if err != nil {
			t.Fatal(err)
		}
		if got := backendkit.RedactURL(u); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
	if got := backendkit.RedactURL(nil); got != "" {
		t.Errorf("RedactURL(nil) = %q", got)
	}
}

func TestURLSecrets(t *testing.T) {
	tests := []struct {
		give string
		want []string
	}{
		{"redis://u:p%40ss@h/0", []string{"p@ss"}},
		{"redis://h/0?password=a%26b&protocol=9&auth_token=" + secret, []string{"a%26b", "a&b", secret}},
		{"redis://h/0?a=1;password=ab;cd", []string{"ab;cd", "ab"}},
		// A parser that splits at ';' reads every credential of the pair.
		{"redis://h/0?password=ab;password=" + secret, []string{"ab;password=" + secret, "ab", secret}},
		{"redis://h/0?x=1;password=ab;auth_token=" + secret + ";y=2", []string{"ab;auth_token=" + secret + ";y=2", "ab", secret + ";y=2", secret}},
		{"mysql://u@h/db?allowCleartextPasswords=1&require_auth=md5&x_auth=1", []string{"1"}},
		{"redis://u@h/0?password=", nil},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.give)
		if err != nil {
			t.Fatal(err)
		}
		if got := backendkit.URLSecrets(u); !slices.Equal(got, tt.want) {
			t.Errorf("URLSecrets(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
	if got := backendkit.URLSecrets(nil); got != nil {
		t.Errorf("URLSecrets(nil) = %q", got)
	}
}

func TestMaskable(t *testing.T) {
	for _, s := range []string{secret, "p@ss/w", "hunter2", "abcdef", "1.2.3.4", "0x1234"} {
		if !backendkit.Maskable(s) {
			t.Errorf("Maskable(%q) = false", s)
		}
	}
	for _, s := range []string{"", "1", "true", "false", "md5", "admin", "5432", "12345", "123456", "-1234567", "3.14159"} {
		if backendkit.Maskable(s) {
			t.Errorf("Maskable(%q) = true", s)
		}
	}
}

func TestMaskText(t *testing.T) {
	tests := []struct {
		give    string
		secrets []string
		want    string
	}{
		// Every form a URL may hold.
		{"a p@ss/w b p%40ss%2Fw c p@ss%2Fw d p%40ss%3Aw", []string{"p@ss/w", "p@ss:w", ""}, "a xxxxx b xxxxx c xxxxx d xxxxx"},
		// Short or numeric values are not looked for: the address stays.
		{"dial tcp 127.0.0.1:1: connect: connection refused", []string{"1", "true", "md5", "admin", "123456"},
			"dial tcp 127.0.0.1:1: connect: connection refused"},
		// A secret inside another is masked whole.
		{"x Zq7SecretVw3Ky y", []string{"Secret", secret}, "x xxxxx y"},
		// Masking one secret cannot leave another behind.
		{"secret1ab", []string{"secret1", "xxxxxab"}, "xxxxx"},
		{"xxxxxxxxxxxx", []string{"xxxxxx"}, "xxxxx"},
	}
	for _, tt := range tests {
		if got := backendkit.MaskText(tt.give, tt.secrets); got != tt.want {
			t.Errorf("MaskText(%q, %q) = %q, want %q", tt.give, tt.secrets, got, tt.want)
		}
	}
}

// leakyError shows the secret only with %#v, as a driver's struct does.
type leakyError struct{ Config string }

func (e *leakyError) Error() string { return "config refused" }

// TestMaskErrorHidesTheWholeChain: no text of the masked error or of an
// error of its chain, in any fmt verb, shows the secret; errors.Is finds
// the sentinels below it and errors.As the values that show none.
func TestMaskErrorHidesTheWholeChain(t *testing.T) {
	sentinel := errors.New("the sentinel")
	clean := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	leaf := fmt.Errorf("server said: near '%s': %w", secret, sentinel)
	leaky := &leakyError{Config: "password=" + secret}
	deep := fmt.Errorf("statement: %w", errors.Join(leaf, context.DeadlineExceeded, clean, leaky))
	err := backendkit.MaskError(deep, []string{secret})
	backendtest.NoSecret(t, "MaskError", err, secret)
	if want := "statement: server said: near 'xxxxx': the sentinel"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Error() = %q, want it to start with %q", err.Error(), want)
	}
	for _, target := range []error{sentinel, context.DeadlineExceeded, fs.ErrNotExist} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe != clean {
		t.Errorf("errors.As did not find the *fs.PathError, which shows no secret")
	}
	var le *leakyError
	if errors.As(err, &le) {
		t.Errorf("errors.As found the *leakyError, whose %%#v shows the secret")
	}
}

func TestMaskErrorKeepsWhatShowsNoSecret(t *testing.T) {
	sentinel := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, secrets := range [][]string{nil, {""}, {"1", "true"}, {secret}} {
		if err := backendkit.MaskError(sentinel, secrets); err != sentinel { //nolint:errorlint // the very error
			t.Errorf("MaskError(%v, %q) = %#v, want the error as it is", sentinel, secrets, err)
		}
	}
	if err := backendkit.MaskError(nil, []string{secret}); err != nil {
		t.Errorf("MaskError(nil) = %v", err)
	}
}
