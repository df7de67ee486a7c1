package simbamysql

import (
	"context"
	"crypto/tls"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// refusedAddr is a loopback address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// sharedURL is the mysql:// URL of the test server, with hosts before and
// after its address, and the user and password of its DSN.
func sharedURL(t *testing.T, before, after []string) string {
	t.Helper()
	cfg := parseDSN(t, backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL"))
	user := cfg.User
	if cfg.Passwd != "" {
		user += ":" + cfg.Passwd
	}
	hosts := append(append(append([]string{}, before...), cfg.Addr), after...)
	return "mysql://" + user + "@" + strings.Join(hosts, ",") + "/" + cfg.DBName
}

// acquireOnce opens a session on b and acquires name.
func acquireOnce(t *testing.T, b *Backend, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := b.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.CloseSession(ctx, s.ID) }()
	r, err := b.Acquire(ctx, s.ID, name)
	if err != nil || !r.Won {
		t.Fatalf("acquire: %v, %v", r, err)
	}
}

// TestMultiHostURLSkipsDownHost: a URL listing a host that refuses
// connections before the server connects to the server. Before the
// multi-host form, the host list was read as one host name and the
// address was "[127.0.0.1:<port>,127.0.0.1]:<port>".
func TestMultiHostURLSkipsDownHost(t *testing.T) {
	raw := sharedURL(t, []string{refusedAddr(t)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Open(ctx, raw, Options{Migrate: true, TablePrefix: "mhdown_"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	acquireOnce(t, b, "down-host-skipped")
}

// fakeReadOnly makes the hosts in ro look read-only for the test.
func fakeReadOnly(t *testing.T, ro ...string) {
	t.Helper()
	prev := readOnlyCheck
	readOnlyCheck = func(ctx context.Context, conn driver.Conn, addr string) (bool, error) {
		for _, a := range ro {
			if a == addr {
				return true, nil
			}
		}
		return prev(ctx, conn, addr)
	}
	t.Cleanup(func() { readOnlyCheck = prev })
}

// TestMultiHostURLSkipsReadOnlyHost: the first host answers but is
// read-only: the connections go to the second, which is the same server
// under another name, found writable by its real @@read_only. (A real
// read-only replica is skipped, and a promoted one found, in
// tools/chaos/internal/topology.)
func TestMultiHostURLSkipsReadOnlyHost(t *testing.T) {
	cfg := parseDSN(t, backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL"))
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	alias := net.JoinHostPort("localhost", port)
	fakeReadOnly(t, cfg.Addr)
	raw := sharedURL(t, nil, []string{alias})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var logs backendtest.LogBuffer
	b, err := Open(ctx, raw, Options{Migrate: true, TablePrefix: "mhro_", Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	acquireOnce(t, b, "read-only-host-skipped")
	if !strings.Contains(logs.String(), alias) || !strings.Contains(logs.String(), "position=2") {
		t.Errorf("the log does not say the second host was chosen:\n%s", logs.String())
	}

	// Every host read-only: one error naming both.
	fakeReadOnly(t, alias)
	_, err = Open(ctx, raw, Options{TablePrefix: "mhro_"})
	if !errors.Is(err, ErrNoWritableHost) || strings.Count(err.Error(), "read-only") != 2 {
		t.Fatalf("every host read-only: %v, want ErrNoWritableHost naming both", err)
	}
}

// TestMultiHostURLEveryHostDown: one error that names every host and its
// problem, matches ErrNoWritableHost, and shows the password nowhere
// (error chain, any fmt verb, the log).
func TestMultiHostURLEveryHostDown(t *testing.T) {
	a, b := refusedAddr(t), refusedAddr(t)
	raw := "mysql://simba:" + backendtest.Secret + "@" + a + "," + b + "/simba_test"
	backendtest.OpenFailsHiding(t, "Open of hosts down", 5*time.Second,
		func(ctx context.Context) (io.Closer, error) { return Open(ctx, raw, Options{}) }, backendtest.Secret)
	backendtest.OpenFailsHiding(t, "simba.OpenBackend of hosts down", 5*time.Second,
		func(ctx context.Context) (io.Closer, error) { return simba.OpenBackend(ctx, raw) }, backendtest.Secret)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Open(ctx, raw, Options{})
	if !errors.Is(err, ErrNoWritableHost) {
		t.Fatalf("got %v, want ErrNoWritableHost", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, a+": ") || !strings.Contains(msg, b+": ") || strings.Count(msg, "refused") != 2 {
		t.Errorf("want each host with its problem in %q", msg)
	}
	if strings.Count(msg, "\n") > 0 {
		t.Errorf("want one line: %q", msg)
	}
}

// TestMultiHostURLTranslation: each host gets its address, 3306 by
// default, IPv6 in brackets; the rest of the URL applies to all.
func TestMultiHostURLTranslation(t *testing.T) {
	tests := []struct {
		give  string
		first string
		addrs []string
	}{
		{"mysql://u:p@h1:1,h2:2/d?timeout=3s", "mysql://u:p@h1:1/d?timeout=3s", []string{"h1:1", "h2:2"}},
		{"mysql://u@h1,h2/d", "mysql://u@h1/d", []string{"h1:3306", "h2:3306"}},
		{"mysql://u@[::1]:3307,[::1]:3308,10.0.0.1/d", "mysql://u@[::1]:3307/d", []string{"[::1]:3307", "[::1]:3308", "10.0.0.1:3306"}},
		{"mysql://u:p%40,x@h1:1,h2:2/d", "mysql://u:p%40,x@h1:1/d", []string{"h1:1", "h2:2"}},
		{"mysql://u@h:1/d", "mysql://u@h:1/d", nil},
		{"u:p@tcp(h1:1)/d", "u:p@tcp(h1:1)/d", nil},
	}
	for _, tt := range tests {
		first, addrs, err := splitHosts(tt.give)
		if err != nil {
			t.Errorf("splitHosts(%q): %v", tt.give, err)
			continue
		}
		if first != tt.first || fmt.Sprint(addrs) != fmt.Sprint(tt.addrs) {
			t.Errorf("splitHosts(%q) = %q, %q; want %q, %q", tt.give, first, addrs, tt.first, tt.addrs)
		}
	}
	// Open gives each host its own TLS server name.
	first, addrs, err := splitHosts("mysql://u@db1.example:1,db2.example:2/d?tls=true")
	if err != nil {
		t.Fatal(err)
	}
	cfg, secrets, err := config(first, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHostsConnector(cfg, addrs, secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.conns) != 2 {
		t.Fatalf("%d connectors", len(h.conns))
	}
}

// TestMultiHostURLRefusesHostileInput: an empty host, a bad port, a host
// given twice or a broken IPv6 address is an *OptionsError (and an
// invalid URL for simba.OpenBackend) naming the host by its position,
// before any connection, and quoting nothing of the URL.
func TestMultiHostURLRefusesHostileInput(t *testing.T) {
	const s = backendtest.Secret
	for _, tt := range []struct{ hosts, want string }{
		{"h1:1,,h2:2", "host 2 of 3: empty host"},
		{",h2:2", "host 1 of 2: empty host"},
		{"h1:1,", "host 2 of 2: empty host"},
		{"h1:1,:2", "host 2 of 2: empty host"},
		{"h1:0,h2:2", "host 1 of 2: the port is not a number"},
		{"h1:65536,h2:2", "host 1 of 2: the port is not a number"},
		{"h1:x" + s + ",h2:2", "host 1 of 2: the port is not a number"},
		{"h1:+1,h2:2", "host 1 of 2: the port is not a number"},
		{"h1:01,h2:2", "host 1 of 2: the port is not a number"},
		{"h1:,h2:2", "host 1 of 2: the port is not a number"},
		{"h1:1:2,h2:2", "host 1 of 2: the port is not a number"},
		{"h1:1,H1:1", "host 2 of 2 is host 1 again"},
		{"h1,h1:3306", "host 2 of 2 is host 1 again"},
		{"[::1,h2:2", "host 1 of 2: an IPv6 address without its ']'"},
		{"[h1]:1,h2:2", "host 1 of 2: not an IPv6 address"},
		{"[::1]x,h2:2", "host 1 of 2: text after the IPv6 address"},
		{"h1%41:1,h2:2", "host 1 of 2: an invalid character"},
	} {
		raw := "mysql://u:" + s + "@" + tt.hosts + "/simba_test"
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := Open(ctx, raw, Options{})
		_, oerr := simba.OpenBackend(ctx, raw)
		cancel()
		var oe *OptionsError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an *OptionsError with %q", tt.hosts, err, tt.want)
			continue
		}
		if !errors.Is(oerr, simba.ErrInvalidURL) {
			t.Errorf("%s: simba.OpenBackend: %v, want ErrInvalidURL", tt.hosts, oerr)
		}
		if text := backendtest.ErrorTexts(err); strings.Contains(text, s) ||
			strings.Contains(text, "h1") || strings.Contains(text, "h2") {
			t.Errorf("%s: the error quotes the URL: %s", tt.hosts, text)
		}
	}
}

// TestMultiHostURLLeavesADemotedHost: once a statement finds its server
// read-only (error 1290, raised here with SIGNAL; a real demotion is in
// tools/chaos/internal/topology), the connections made until then are
// not used again, and the next goes to the host that is writable now.
func TestMultiHostURLLeavesADemotedHost(t *testing.T) {
	cfg := parseDSN(t, backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL"))
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	alias := net.JoinHostPort("localhost", port)
	raw := sharedURL(t, nil, []string{alias})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var logs backendtest.LogBuffer
	b, err := Open(ctx, raw, Options{Migrate: true, TablePrefix: "mhdemote_", Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	acquireOnce(t, b, "before-demotion")
	if strings.Contains(logs.String(), "position=2") {
		t.Fatalf("the second host was chosen before the demotion:\n%s", logs.String())
	}
	_, err = b.db.ExecContext(ctx, "SIGNAL SQLSTATE 'HY000' SET MYSQL_ERRNO = 1290, MESSAGE_TEXT = 'read-only (test)'")
	if !demotedError(err) {
		t.Fatalf("SIGNAL: %v, want error 1290", err)
	}
	fakeReadOnly(t, cfg.Addr)
	acquireOnce(t, b, "after-demotion")
	if !strings.Contains(logs.String(), "position=2") {
		t.Errorf("the backend kept its connections to the demoted host:\n%s", logs.String())
	}
}

// TestMultiHostURLOverTLS: the hosts of a multi-host URL all speak TLS
// with Options.TLS, each verified under its own name (the configuration
// names none), with the password user of the TLS test server; a host
// that refuses connections is skipped first.
func TestMultiHostURLOverTLS(t *testing.T) {
	dsn, password, roots := tlsServer(t)
	cfg := parseDSN(t, dsn)
	raw := "mysql://" + cfg.User + "@" + refusedAddr(t) + "," + cfg.Addr + "/" + cfg.DBName
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Open(ctx, raw, Options{Password: password, TablePrefix: "mhtls_", Migrate: true,
		TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	acquireOnce(t, b, "over-tls")

	// Without the CA, every host fails, and the error holds no password.
	backendtest.OpenFailsHiding(t, "Open without the CA", 10*time.Second, func(ctx context.Context) (io.Closer, error) {
		return Open(ctx, raw, Options{Password: password, TLS: &tls.Config{MinVersion: tls.VersionTLS12}})
	}, password)
}
