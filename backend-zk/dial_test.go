package simbazk

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// selfSigned returns a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "zk test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// answerWith makes ln write reply on each connection it accepts, then
// close it, until the test ends.
func answerWith(t *testing.T, ln net.Listener, reply string) {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { _ = ln.Close() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(reply))
			_ = c.Close()
		}
	})
}

func TestDialTLSThroughDialer(t *testing.T) {
	cert, pool := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	answerWith(t, ln, "ok")

	var dialed atomic.Int32
	dialer := func(ctx context.Context, network, address string) (net.Conn, error) {
		dialed.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
	b, err := New([]string{ln.Addr().String()}, Options{TLS: &tls.Config{RootCAs: pool}, Dialer: dialer})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := b.dialRaw(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("TLS dial with the server name taken from the address: %v", err)
	}
	got, _ := io.ReadAll(c)
	_ = c.Close()
	if string(got) != "ok" || dialed.Load() != 1 {
		t.Fatalf("read %q through %d custom dials, want \"ok\" through 1", got, dialed.Load())
	}

	untrusted, err := New([]string{ln.Addr().String()}, Options{TLS: &tls.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusted.Close()
	if c, err := untrusted.dialRaw(context.Background(), "tcp", ln.Addr().String()); err == nil {
		_ = c.Close()
		t.Fatal("TLS dial to an untrusted server succeeded")
	}
}
