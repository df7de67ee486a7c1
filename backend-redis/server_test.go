package simbaredis

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// privateServer is a redis-server started by one test, for faults that
// would disturb the shared test server: restarts, killed connections,
// passwords, eviction policies. Like every server test it needs
// SIMBA_TEST_REDIS_URL (the sign that Redis tests are wanted) and the
// redis-server binary.
type privateServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	tls  *tls.Config // the clients' TLS settings of a TLS-only server
	cmd  *exec.Cmd
}

// startServer starts a private server with extra redis-server arguments
// (such as "--requirepass", "x") and stops it when the test ends.
func startServer(t testing.TB, extra ...string) *privateServer {
	t.Helper()
	serverURL(t)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	s := &privateServer{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), args: extra}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startTLSServer is startServer for a server that only speaks TLS, with a
// certificate made for the test; s.tls trusts it.
func startTLSServer(t testing.TB, extra ...string) *privateServer {
	t.Helper()
	serverURL(t)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	s := &privateServer{t: t, bin: bin, dir: t.TempDir(), port: freePort(t)}
	cert, key, pool := selfSigned(t)
	certFile, keyFile := filepath.Join(s.dir, "cert.pem"), filepath.Join(s.dir, "key.pem")
	for file, data := range map[string][]byte{certFile: cert, keyFile: key} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The later --port 0 turns the plain port off.
	s.args = append([]string{"--port", "0", "--tls-port", strconv.Itoa(s.port),
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", certFile,
		"--tls-auth-clients", "no"}, extra...)
	s.tls = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// selfSigned returns a PEM certificate for 127.0.0.1, its PEM key and a
// pool that trusts it.
func selfSigned(t testing.TB) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(parsed)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), pool
}

func (s *privateServer) url() string {
	if s.tls != nil {
		return fmt.Sprintf("rediss://127.0.0.1:%d/0", s.port)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port)
}

func (s *privateServer) start() {
	s.t.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "log"),
	}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port), MaxRetries: -1, TLSConfig: s.tls})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		// A password-protected server answers NOAUTH: it is up.
		if err == nil || redis.HasErrorPrefix(err, "NOAUTH") {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			s.t.Fatalf("redis-server on port %d not ready: %v\n%s", s.port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server (no persistence: its data is gone).
func (s *privateServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// restart kills the server and starts it again on the same port, empty.
func (s *privateServer) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}
