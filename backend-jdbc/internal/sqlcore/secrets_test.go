package sqlcore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/simba-go/simba/core/backendtest"
)

// TestConnectErrorHidesSecretsInTheWholeChain: ConnectError hides the
// secret in every error its chain holds, in every fmt verb, and keeps
// errors.Is working on the sentinels below it.
func TestConnectErrorHidesSecretsInTheWholeChain(t *testing.T) {
	const secret = "Zq7SecretVw3Ky"
	sentinel := errors.New("the sentinel")
	leaf := fmt.Errorf("server said: near '%s': %w", secret, sentinel)
	deep := fmt.Errorf("statement: %w", errors.Join(leaf, context.DeadlineExceeded))
	err := testPkg.ConnectError(deep, []string{secret}, deep)
	backendtest.NoSecret(t, "ConnectError", err, secret)
	if !errors.Is(err, sentinel) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v no longer matches its sentinels", err)
	}
}

// TestConnectErrorKeepsShortValues: a value too short to be told from an
// address (x_auth=1) is not masked in the driver's message.
func TestConnectErrorKeepsShortValues(t *testing.T) {
	cause := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	err := testPkg.ConnectError(cause, []string{"1", "md5"}, cause)
	if !strings.HasSuffix(err.Error(), ": connect: dial tcp 127.0.0.1:1: connect: connection refused") {
		t.Errorf("ConnectError = %q, want the address as it is", err)
	}
}
