package backendtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ServerEnv returns the value of the variable naming a test server.
// Without it the test is skipped, except under CI, where it fails: CI never
// passes by skipping.
func ServerEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set (CI is set, so this test must run): eval \"$(tools/testenv/up)\"", name)
		}
		t.Skipf("%s is not set: eval \"$(tools/testenv/up)\" to run against a real server", name)
	}
	return v
}

// TLSServer returns the value of envVar, the variable naming the TLS test
// server (with its password user), the file of the CA that signed the
// server's certificate (SIMBA_TEST_TLS_CA) and that CA as a pool. Without
// them the test is skipped, except under CI, where it fails.
func TLSServer(t testing.TB, envVar string) (raw, caFile string, roots *x509.CertPool) {
	t.Helper()
	raw = ServerEnv(t, envVar)
	caFile = ServerEnv(t, "SIMBA_TEST_TLS_CA")
	data, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("SIMBA_TEST_TLS_CA: %v", err)
	}
	roots = x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data) {
		t.Fatalf("SIMBA_TEST_TLS_CA: no certificate in %s", caFile)
	}
	return raw, caFile, roots
}

// OtherCA returns a CA of its own, which signed nothing a test server
// shows, as a pool and as a PEM file removed when t ends.
func OtherCA(t testing.TB) (roots *x509.CertPool, file string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Another CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	file = filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return roots, file
}

// TLSFailure is an Open that must fail: Want are the words its message
// must hold, in any case.
type TLSFailure struct {
	Name string
	Open func(ctx context.Context) (io.Closer, error)
	Want []string
}

// RunTLSFailures runs each case as a subtest: Open must fail within 10s,
// with an error whose message is one line holding each of its Want, and
// that shows none of secrets in any text of its chain
// ([NoSecret]). The message is logged.
func RunTLSFailures(t *testing.T, cases []TLSFailure, secrets ...string) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var got error
			OpenFailsHiding(t, "Open", 10*time.Second, func(ctx context.Context) (io.Closer, error) {
				b, err := c.Open(ctx)
				got = err
				return b, err
			}, secrets...)
			OneClearLine(t, got, c.Want...)
		})
	}
}

// OneClearLine fails t unless err's message is one line holding each of
// want, in any case. A nil err passes.
func OneClearLine(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	t.Logf("Open: %s", msg)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("the message is more than one line:\n%s", msg)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(msg), strings.ToLower(w)) {
			t.Errorf("the message does not say %q: %s", w, msg)
		}
	}
}
