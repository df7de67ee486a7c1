package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ give, want string }{
		{"memory://", "memory://"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:s3cr3t@host:6379/0", "redis://:xxxxx@host:6379/0"},
		{"rediss://user:s3cr3t@host", "rediss://user:xxxxx@host"},
		{"postgres://app:s3cr3t@db/app?sslmode=require", "postgres://app:xxxxx@db/app?sslmode=require"},
		{"postgres://app@db/app?password=s3cr3t&sslmode=require", "postgres://app@db/app?password=xxxxx"},
		{"mysql://root@127.0.0.1:3306/simba", "mysql://root@127.0.0.1:3306/simba"},
		{"zk://app:s3cr3t@zk1:2181,zk2:2181/app", "zk://app:xxxxx@zk1:2181,zk2:2181/app"},
		{"user:s3cr3t@host", "xxxxx@host"},
		{"localhost", "localhost"},
	}
	for _, tt := range tests {
		if got := redactURL(tt.give); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestMemoryURLsNameSharedStores(t *testing.T) {
	a, err := openBackend(t.Context(), "memory://shared-store-test", backendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := openBackend(t.Context(), "MEMORY://shared-store-test/", backendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := a.OpenSession(t.Context(), 1e9)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.KeepAlive(t.Context(), s.ID, simba.KeepAliveRequest{Lease: 1e9}); err != nil {
		t.Errorf("a session of one connection is unknown to the other: %v", err)
	}
	if _, err := a.Acquire(t.Context(), s.ID, "x"); err != nil {
		t.Fatal(err)
	}
	if owner, _, ok := memoryStore(t, "shared-store-test").Owner("x"); !ok || owner != s.ID {
		t.Errorf("the store of memory://shared-store-test does not show the lease x of %s", s.ID)
	}
}

// memoryStore returns the in-process store of memory://name, the one every
// simba of this process given that URL opens.
func memoryStore(t *testing.T, name string) *memory.Server {
	t.Helper()
	c, err := memory.Open(t.Context(), "memory://"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Server()
}

// TestRegistryErrorsAreBadUsage: the errors of the backends about a URL
// they refuse are bad usage, whatever checks simba made before.
func TestRegistryErrorsAreBadUsage(t *testing.T) {
	for _, u := range []string{
		"memory://u@store",
		"mysql://u:s3cr3t@db.invalid:3306/app?tls=nosuch",
		"postgres://u:s3cr3t@db.invalid/app?sslmode=bogus",
		"redis://u:s3cr3t@db.invalid:6379/0?no_such_option=1",
		"zk://u@zk1:2181",
	} {
		_, err := openBackend(t.Context(), u, backendOptions{})
		var bad *badURLError
		if !errors.As(err, &bad) {
			t.Errorf("openBackend(%q) = %v, want a *badURLError", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("openBackend(%q): the error shows the password: %v", u, err)
		}
	}
}

// serverURL returns the backend URL of a test server from its variable,
// skipping the test when it is unset, unless CI is set.
func serverURL(t *testing.T, variable string, toURL func(string) string) string {
	t.Helper()
	v := os.Getenv(variable)
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set, and CI is: the test cannot be skipped", variable)
		}
		t.Skipf("%s is not set", variable)
	}
	return toURL(v)
}

var mysqlDSN = regexp.MustCompile(`^([^@/]*)@tcp\(([^)]*)\)/([^?]*)`)

// realBackends are the test servers, with their URLs for simba.
var realBackends = []struct {
	name     string
	variable string
	toURL    func(string) string
}{
	{"redis", "SIMBA_TEST_REDIS_URL", func(v string) string { return v }},
	{"postgres", "SIMBA_TEST_POSTGRES_URL", func(v string) string { return v }},
	{"mysql", "SIMBA_TEST_MYSQL_URL", func(v string) string {
		// The variable is a go-sql-driver DSN: user[:pass]@tcp(host:port)/db?...
		if m := mysqlDSN.FindStringSubmatch(v); m != nil {
			return "mysql://" + m[1] + "@" + m[2] + "/" + m[3]
		}
		return v
	}},
	{"zk", "SIMBA_TEST_ZK_SERVERS", func(v string) string { return "zk://" + v + "/simba-cli-test" }},
}

func TestRealBackends(t *testing.T) {
	for _, be := range realBackends {
		t.Run(be.name, func(t *testing.T) {
			url := serverURL(t, be.variable, be.toURL)
			r := runSimba(t, "status", "--backend", url, "--migrate", "--format", "json")
			if r.code != exitOK {
				t.Fatalf("status: exit code %d, stderr %q", r.code, r.stderr)
			}
			var st struct{ Session struct{ Status string } }
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Session.Status != "LIVE" {
				t.Fatalf("status: %v, output %s", err, r.stdout)
			}

			name := "cli-test-" + randomHex(t)
			r = runSimba(t, append([]string{"lock", "--backend", url, "--migrate", "--timeout", "20s", name, "--"}, helper(t, "env")...)...)
			if r.code != 0 || !regexp.MustCompile(`^lease=`+name+` token=[1-9][0-9]*\n$`).MatchString(r.stdout) {
				t.Errorf("lock: exit code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			r = runSimba(t, append([]string{"leader", "--backend", url, "--migrate", name, "--"}, helper(t, "exit", "6")...)...)
			if r.code != 6 {
				t.Errorf("leader: exit code %d, stderr %q", r.code, r.stderr)
			}
			if strings.Contains(r.stderr, "level=WARN") {
				t.Errorf("warnings: %s", r.stderr)
			}
		})
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestSchemesInAnyCase: an upper-case scheme reaches the host of the URL,
// not a driver's defaults (pgx reads a URL by its lower-case prefix only).
func TestSchemesInAnyCase(t *testing.T) {
	for _, u := range []string{
		"POSTGRES://u:s3cr3t@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"PostgreSQL://u:s3cr3t@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"MySQL://u:s3cr3t@127.0.0.1:1/db?timeout=2s",
		"Redis://u:s3cr3t@127.0.0.1:1/0",
	} {
		_, err := openBackend(t.Context(), u, backendOptions{})
		var bad *badURLError
		if err == nil || errors.As(err, &bad) || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("openBackend(%q) = %v, want a failure to reach 127.0.0.1:1 without the password", u, err)
		}
	}
}
