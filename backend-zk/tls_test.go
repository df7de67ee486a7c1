package simbazk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// tlsServers returns the servers of the TLS test Zookeeper
// (SIMBA_TEST_ZK_TLS_SERVERS, its secureClientPort), the digest identity
// of the tests there (SIMBA_TEST_ZK_TLS_AUTH, user:password) and the CA
// that signed the server's certificate (SIMBA_TEST_TLS_CA). Without them
// the test is skipped, or fails when CI is set.
func tlsServers(t testing.TB) (servers []string, auth string, roots *x509.CertPool) {
	t.Helper()
	servers = testServers(t, "SIMBA_TEST_ZK_TLS_SERVERS")
	auth = backendtest.ServerEnv(t, "SIMBA_TEST_ZK_TLS_AUTH")
	_, _, roots = backendtest.TLSServer(t, "SIMBA_TEST_ZK_TLS_AUTH")
	if _, pass, ok := strings.Cut(auth, ":"); !ok || pass == "" {
		t.Fatal("SIMBA_TEST_ZK_TLS_AUTH is not user:password")
	}
	return servers, auth, roots
}

// tlsAdmin is a plain Zookeeper connection over TLS, authenticated as
// auth, closed when t ends.
func tlsAdmin(t testing.TB, servers []string, auth string, roots *x509.CertPool) *admin {
	t.Helper()
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
		return d.Dial(network, address)
	}
	conn, events, err := zk.Connect(servers, 10*time.Second, zk.WithDialer(dial), zk.WithLogger(zkLogger{quiet()}))
	if err != nil {
		t.Fatalf("admin connect: %v", err)
	}
	a := &admin{t: t, conn: conn, events: events}
	if err := conn.AddAuth("digest", []byte(auth)); err != nil {
		a.close()
		t.Fatalf("admin auth: %v", err)
	}
	return a
}

// tlsRoot returns a root of its own on the TLS server, made now, writable
// by auth only (and readable by everyone, as Simba's default ACL), and
// removed with everything under it when the test ends.
func tlsRoot(t testing.TB, servers []string, auth string, roots *x509.CertPool) string {
	t.Helper()
	root := "/simba-tls-test-" + randomHex(6)
	a := tlsAdmin(t, servers, auth, roots)
	defer a.close()
	if _, err := a.conn.Create(root, nil, 0, append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...)); err != nil {
		t.Fatalf("create %s: %v", root, err)
	}
	t.Cleanup(func() {
		a := tlsAdmin(t, servers, auth, roots)
		defer a.close()
		a.removeAll(root)
	})
	return root
}

// TestTLSConformance runs the conformance suite over TLS on the
// secureClientPort, every node a Backend of its own made by New with
// Options.TLS and Options.Auth, under a root only that identity may write.
func TestTLSConformance(t *testing.T) {
	servers, auth, roots := tlsServers(t)
	root := tlsRoot(t, servers, auth, roots) + "/simba"
	backendtest.Run(t, backendtest.Harness{
		New: func(t testing.TB) simba.Backend {
			b, err := New(servers, Options{Root: root, Auth: auth, TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, Logger: quiet()})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		Lease: 2 * time.Second,
	})
}

// TestTLSForms opens the TLS server in each form the README gives: Open
// with a connect string (with a chroot too) and New, with Options.TLS
// and Options.Auth, by address and by a name of the certificate. Each
// backend wins a lock.
func TestTLSForms(t *testing.T) {
	servers, auth, roots := tlsServers(t)
	root := tlsRoot(t, servers, auth, roots)
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	_, port, err := net.SplitHostPort(servers[0])
	if err != nil {
		t.Fatal(err)
	}
	forms := []struct {
		name string
		open func(ctx context.Context, opts Options) (*Backend, error)
	}{
		{"Open", func(ctx context.Context, opts Options) (*Backend, error) {
			opts.Root = root + "/open"
			return Open(ctx, strings.Join(servers, ","), opts)
		}},
		{"Open with a chroot", func(ctx context.Context, opts Options) (*Backend, error) {
			return Open(ctx, strings.Join(servers, ",")+root, opts)
		}},
		{"Open by localhost", func(ctx context.Context, opts Options) (*Backend, error) {
			opts.Root = root + "/localhost"
			return Open(ctx, net.JoinHostPort("localhost", port), opts)
		}},
		{"New", func(_ context.Context, opts Options) (*Backend, error) {
			opts.Root = root + "/new"
			return New(servers, opts)
		}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			b, err := f.open(ctx, Options{Auth: auth, TLS: cfg, Logger: quiet()})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer func() { _ = b.Close() }()
			g, err := b.OpenSession(ctx, 2*time.Second)
			if err != nil {
				t.Fatalf("OpenSession: %v", err)
			}
			if r, err := b.Acquire(ctx, g.ID, "tls-form"); err != nil || !r.Won {
				t.Fatalf("Acquire = %+v, %v; want won", r, err)
			}
		})
	}
}

// TestTLSOpenFailures checks that a wrong CA, a wrong host name, a wrong
// password and no TLS each fail Open with one line that names the problem
// and shows no password.
func TestTLSOpenFailures(t *testing.T) {
	otherRoots, _ := backendtest.OtherCA(t)
	servers, auth, roots := tlsServers(t)
	root := tlsRoot(t, servers, auth, roots)
	user, password, _ := strings.Cut(auth, ":")
	connect := strings.Join(servers, ",")
	cases := []struct {
		name string
		opts Options
		want []string // in the message, in any case
		is   error
	}{
		{"system roots", Options{Auth: auth, TLS: &tls.Config{}}, []string{"certificate signed by unknown authority"}, nil},
		{"wrong CA", Options{Auth: auth, TLS: &tls.Config{RootCAs: otherRoots}}, []string{"certificate signed by unknown authority"}, nil},
		{"wrong host name", Options{Auth: auth, TLS: &tls.Config{RootCAs: roots, ServerName: "wrong.example"}},
			[]string{"certificate is valid for", "not wrong.example"}, nil},
		{"wrong password", Options{Auth: user + ":" + backendtest.Secret, TLS: &tls.Config{RootCAs: roots}},
			[]string{"authentication", `"` + user + `"`, "another password", root}, ErrAuth},
		{"no TLS", Options{Auth: auth, DialTimeout: 2 * time.Second}, []string{servers[0], "closed the connection", "Options.TLS"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Root = root
			c.opts.Logger = quiet()
			var got error
			backendtest.OpenFailsHiding(t, "Open", 10*time.Second, func(ctx context.Context) (io.Closer, error) {
				b, err := Open(ctx, connect, c.opts)
				got = err
				if err != nil {
					return nil, err
				}
				return b, nil
			}, password, backendtest.Secret)
			if got == nil {
				return
			}
			msg := got.Error()
			t.Logf("Open: %s", msg)
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("the message is more than one line:\n%s", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(strings.ToLower(msg), strings.ToLower(w)) {
					t.Errorf("the message does not say %q: %s", w, msg)
				}
			}
			if c.is != nil && !errors.Is(got, c.is) {
				t.Errorf("Open: %v, want an error matching %v", got, c.is)
			}
		})
	}
}
