package simbazk

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// closedPort returns an address nothing listens on.
func closedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// within fails the test when op took longer than limit.
func within(t *testing.T, limit time.Duration, what string, op func()) {
	t.Helper()
	start := time.Now()
	op()
	if took := time.Since(start); took > limit {
		t.Fatalf("%s took %v, want at most %v", what, took, limit)
	}
}

func TestOpenSilentServer(t *testing.T) {
	silent := backendtest.SilentListener(t)
	var err error
	within(t, time.Second, "Open of a silent server with a 300ms context", func() {
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err = Open(c, silent, Options{DialTimeout: 5 * time.Second, Logger: quiet()})
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open of a silent server = %v, want context.DeadlineExceeded", err)
	}

	within(t, 1500*time.Millisecond, "Open of two silent servers with DialTimeout 300ms and no deadline", func() {
		_, err = Open(context.Background(), silent+","+silent, Options{DialTimeout: 300 * time.Millisecond, Logger: quiet()})
	})
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 300ms (DialTimeout)") {
		t.Errorf("Open of silent servers = %v, want an error naming DialTimeout, not matching DeadlineExceeded", err)
	}

	refused := closedPort(t)
	_, err = Open(context.Background(), refused, Options{Logger: quiet()})
	var opErr *net.OpError
	if !errors.As(err, &opErr) || !strings.Contains(err.Error(), refused) {
		t.Errorf("Open of a closed port = %v, want a *net.OpError naming %s", err, refused)
	}
	t.Log(err)
}

// TestOpenNotZookeeper: a server that answers in another protocol fails
// Open at once, by an error that says it is not Zookeeper, and Open moves
// past it to a server that is.
func TestOpenNotZookeeper(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	answerWith(t, ln, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
	var b *Backend
	within(t, time.Second, "Open of a server that is not Zookeeper", func() {
		_, err = Open(context.Background(), ln.Addr().String(), Options{Logger: quiet()})
	})
	if err == nil || !strings.Contains(err.Error(), "not a Zookeeper server") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("Open of an HTTP server = %v, want an error naming it and saying it is not Zookeeper", err)
	}
	servers := testServers(t, "SIMBA_TEST_ZK_SERVERS")
	b, err = Open(ctx(t), ln.Addr().String()+","+strings.Join(servers, ","), Options{Logger: quiet()})
	if err != nil {
		t.Fatalf("Open past a server that is not Zookeeper: %v", err)
	}
	_ = b.Close()
}

func TestOpenMovesPastSilentServers(t *testing.T) {
	servers := testServers(t, "SIMBA_TEST_ZK_SERVERS")
	connect := backendtest.SilentListener(t) + "," + closedPort(t) + "," + strings.Join(servers, ",")
	var b *Backend
	var err error
	within(t, time.Second, "Open past a silent and a closed server with DialTimeout 300ms", func() {
		b, err = Open(ctx(t), connect, Options{DialTimeout: 300 * time.Millisecond, Logger: quiet()})
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()

	// A session's connect waits one response timeout (2/3 of the lease),
	// not the library's ten, for a silent server before it tries the next.
	// The library picks servers in random order: two sessions make it
	// likely that one meets the silent server first.
	b, err = New([]string{backendtest.SilentListener(t), servers[0]}, Options{Root: testRoot(t, servers), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for range 2 {
		c, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		_, err := b.OpenSession(c, 3*time.Second)
		cancel()
		if err != nil {
			t.Fatalf("OpenSession with one silent server among two: %v", err)
		}
	}
}

// TestOpenSessionSilentServer checks that OpenSession gives up at its
// context's deadline and Close returns within a few seconds while the
// library still waits for the server's connect response.
func TestOpenSessionSilentServer(t *testing.T) {
	b, err := New([]string{backendtest.SilentListener(t)}, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	within(t, time.Second, "OpenSession on a silent server with a 300ms context", func() {
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err = b.OpenSession(c, 15*time.Second)
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OpenSession on a silent server = %v, want context.DeadlineExceeded", err)
	}

	opened := make(chan error, 1)
	go func() {
		_, err := b.OpenSession(context.Background(), 15*time.Second) // no deadline: only Close ends it
		opened <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it connect
	within(t, 2500*time.Millisecond, "Close with sessions connecting to a silent server", func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := <-opened; !errors.Is(err, ErrClosed) {
		t.Errorf("OpenSession during Close = %v, want ErrClosed", err)
	}
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		give        string
		wantConnect string
		wantAuth    string
		wantErr     string // "" for none
	}{
		{give: "zk://zk1:2181", wantConnect: "zk1:2181"},
		{give: "ZK://zk1:2181,zk2:2182/app/x", wantConnect: "zk1:2181,zk2:2182/app/x"},
		{give: "zk://app:s3cr3t@zk1:2181/app", wantConnect: "zk1:2181/app", wantAuth: "app:s3cr3t"},
		{give: "zk://app:p@s:s/w?x#y@zk1:2181,[::1]:2181/app", wantConnect: "zk1:2181,[::1]:2181/app", wantAuth: "app:p@s:s/w?x#y"},
		{give: "zk://", wantErr: "names no server"},
		{give: "zk://u:s3cr3t@host", wantErr: `server "host": no port: want HOST:PORT`},
		{give: "zk://host:2181?x=1", wantErr: "query parameters are not supported"},
		{give: "zk://host:2181#s3cr3t", wantErr: "query parameters are not supported"},
		{give: "zk://s3cr3t@host:2181", wantErr: "user information must be USER:PASSWORD"},
		{give: "zk://:s3cr3t@host:2181", wantErr: "user information must be USER:PASSWORD"},
		{give: "zk://app:@host:2181", wantErr: "user information must be USER:PASSWORD"},
		{give: "zk://u:s3cr3t@host:2181/app/", wantErr: "chroot"},
		{give: "redis://u:s3cr3t@host:2181", wantErr: "want zk://"},
		{give: "u:s3cr3t@host:2181", wantErr: "want zk://"},
	}
	for _, tt := range tests {
		connect, auth, err := ParseURL(tt.give)
		if tt.wantErr == "" {
			if err != nil || connect != tt.wantConnect || auth != tt.wantAuth {
				t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tt.give, connect, auth, err, tt.wantConnect, tt.wantAuth)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, simba.ErrInvalidURL) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidOptions and ErrInvalidURL saying %q", tt.give, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ParseURL(%q) = %q shows the password", tt.give, err)
		}
	}
}

func TestOpenBackendRegistered(t *testing.T) {
	_, err := simba.OpenBackend(context.Background(), "zk://u:s3cr3t@host")
	if !errors.Is(err, simba.ErrInvalidURL) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("OpenBackend of a bad zk URL = %v, want ErrInvalidURL without the password", err)
	}
	var opened error
	within(t, time.Second, "OpenBackend of a silent server with a 300ms context", func() {
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, opened = simba.OpenBackend(c, "zk://"+backendtest.SilentListener(t))
	})
	if !errors.Is(opened, context.DeadlineExceeded) {
		t.Errorf("OpenBackend of a silent server = %v, want context.DeadlineExceeded", opened)
	}

	servers := testServers(t, "SIMBA_TEST_ZK_SERVERS")
	root := testRoot(t, servers) // removed with its parents' test nodes at the end
	ob, err := simba.OpenBackend(ctx(t), "zk://"+testAuth+"@"+strings.Join(servers, ",")+root)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	b, ok := ob.(*Backend)
	if !ok {
		t.Fatalf("OpenBackend(zk://...) = %T, want *Backend", ob)
	}
	if b.Root() != root+DefaultRoot || b.opts.Auth != testAuth {
		t.Errorf("OpenBackend: root %q, auth set %t; want %q and the URL's identity", b.Root(), b.opts.Auth == testAuth, root+DefaultRoot)
	}
	s := mustOpen(t, b, lease)
	if r := mustAcquire(t, b, s, "registry"); !r.Won {
		t.Error("acquire through a backend of OpenBackend not won")
	}
}

// TestProbeClosesItsSession checks the probe's protocol against the real
// server: the session it opens is closed, as the server confirms.
func TestProbeClosesItsSession(t *testing.T) {
	servers := testServers(t, "SIMBA_TEST_ZK_SERVERS")
	b, err := New(servers, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conn, err := b.dialRaw(ctx(t), "tcp", servers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	closed, err := handshake(conn)
	if err != nil || !closed {
		t.Fatalf("handshake = %t, %v; want the session closed", closed, err)
	}
}
