package sqlcore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// chainTexts returns Error, %v, %+v and %#v of err and of every error of
// its chain.
func chainTexts(err error) string {
	var b strings.Builder
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		fmt.Fprintf(&b, "%s\n%v\n%+v\n%#v\n", e.Error(), e, e, e)
		for _, x := range unwrapped(e) {
			walk(x)
		}
	}
	walk(err)
	return b.String()
}

// TestMaskedHidesSecretsInTheWholeChain: Masked and ConnectError hide the
// secret in every error their chain holds, in every fmt verb, and keep
// errors.Is working on the sentinels below it.
func TestMaskedHidesSecretsInTheWholeChain(t *testing.T) {
	const secret = "Zq7SecretVw3Ky"
	sentinel := errors.New("the sentinel")
	leaf := fmt.Errorf("server said: near '%s': %w", secret, sentinel)
	deep := fmt.Errorf("statement: %w", errors.Join(leaf, context.DeadlineExceeded))
	for name, err := range map[string]error{
		"Masked":       Masked(deep, []string{secret}),
		"ConnectError": testPkg.ConnectError(deep, []string{secret}, deep),
	} {
		if text := chainTexts(err); strings.Contains(text, secret) {
			t.Errorf("%s: the chain shows the secret:\n%s", name, text)
		}
		if !errors.Is(err, sentinel) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v no longer matches its sentinels", name, err)
		}
	}
	if err := Masked(sentinel, []string{secret}); err != sentinel { //nolint:errorlint // the very error
		t.Errorf("Masked of an error without the secret = %#v, want it as it is", err)
	}
}

// TestSecretKey: the parameters that may hold a credential, in any case
// and spelling, and not the others.
func TestSecretKey(t *testing.T) {
	for _, k := range []string{"password", "Password", "PASSWORD", "sslpassword", "passwd", "pass", "pwd",
		"sentinel_password", "sentinelPassword", "sentinel-password", "requirepass", "auth_token", "client_secret", "auth", "authSource", "oauth_bearer"} {
		if !SecretKey(k) {
			t.Errorf("SecretKey(%q) = false", k)
		}
	}
	for _, k := range []string{"sslmode", "user", "dbname", "connect_timeout", "timeout", "tls", "host"} {
		if SecretKey(k) {
			t.Errorf("SecretKey(%q) = true", k)
		}
	}
}
