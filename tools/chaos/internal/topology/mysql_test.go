package topology

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	simbamysql "github.com/simba-go/simba/backend-jdbc/mysql"
)

// mdbStart starts a topology for a test and stops it at the end.
func mdbStart(t *testing.T, opts MariaDBOptions) *MariaDB {
	t.Helper()
	if testing.Short() {
		t.Skip("starts two MariaDB servers")
	}
	if _, err := exec.LookPath("mariadbd"); err != nil {
		t.Skip("mariadbd is not installed (tools/testenv/up mysql installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := StartMariaDBReplica(ctx, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Down(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return m
}

// mdbAcquireSoon opens a session and acquires name on b, trying again for
// up to 20s while the topology has no primary.
func mdbAcquireSoon(t *testing.T, b *simbamysql.Backend, name string) uint64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := b.OpenSession(ctx, 5*time.Second)
		if err == nil {
			res, aerr := b.Acquire(ctx, s.ID, name)
			cancel()
			if aerr == nil && res.Won {
				return res.Token
			}
			err = aerr
			if err == nil {
				err = errors.New("lost")
			}
		} else {
			cancel()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no acquire within 20s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMariaDBPromotionIsFound promotes the replica twice under one open
// backend: its multi-host URL finds each new primary without a restart,
// and the URL listing the read-only replica first skips it.
func TestMariaDBPromotionIsFound(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the servers and proxies are down
	m := mdbStart(t, MariaDBOptions{SemiSync: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b, err := simbamysql.Open(ctx, m.URL(), simbamysql.Options{Migrate: true, TablePrefix: "promo_"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first := mdbAcquireSoon(t, b, "a")

	// The replica listed first: it is read-only, and skipped.
	u := m.URL()
	hosts := u[strings.LastIndexByte(u, '@')+1 : strings.LastIndexByte(u, '/')]
	h := strings.Split(hosts, ",")
	reversed := strings.Replace(u, hosts, h[1]+","+h[0], 1)
	r, err := simbamysql.Open(ctx, reversed, simbamysql.Options{TablePrefix: "promo_"})
	if err != nil {
		t.Fatal(err)
	}
	got := mdbAcquireSoon(t, r, "b")
	_ = r.Close()
	if got == 0 {
		t.Fatal("no token")
	}

	last := first
	for i := range 2 {
		before := m.Primary()
		if err := m.Inject(ctx, Promote); err != nil {
			t.Fatal(err)
		}
		if m.Primary() == before {
			t.Fatalf("promotion %d: primary still %s", i+1, before)
		}
		tok := mdbAcquireSoon(t, b, "a")
		if tok <= last {
			t.Errorf("promotion %d: token %d after %d (semi-synchronous replication)", i+1, tok, last)
		}
		last = tok
		t.Logf("promotion %d: %s now primary, in %v; token %d", i+1, m.Primary(), m.LastPromotion(), tok)
	}
}

// TestMariaDBEveryHostDown: a multi-host URL whose hosts are all down is
// one error naming each host, without the password.
func TestMariaDBEveryHostDown(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the servers and proxies are down
	m := mdbStart(t, MariaDBOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range m.nodes {
		if err := m.run(ctx, n, "kill"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := simbamysql.Open(ctx, m.URL(), simbamysql.Options{})
	if !errors.Is(err, simbamysql.ErrNoWritableHost) {
		t.Fatalf("got %v, want ErrNoWritableHost", err)
	}
	for _, s := range []string{fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if strings.Contains(s, m.Secret()) {
			t.Fatalf("the password shows in %s", s)
		}
	}
	if strings.Count(err.Error(), "connection refused") != 2 {
		t.Errorf("want each host's problem in: %v", err)
	}
	t.Log(err)
}

// TestMariaDBSwitchoverIsFound switches the primary over with both
// servers up: the old primary turns read-only with the backend's
// connections still open to it, and the backend must move to the new
// primary rather than keep writing to the old one.
func TestMariaDBSwitchoverIsFound(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the servers and proxies are down
	m := mdbStart(t, MariaDBOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b, err := simbamysql.Open(ctx, m.URL(), simbamysql.Options{Migrate: true, TablePrefix: "switch_"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	last := mdbAcquireSoon(t, b, "a")
	for i := range 2 {
		before := m.Primary()
		if err := m.Inject(ctx, Failover); err != nil {
			t.Fatal(err)
		}
		if m.Primary() == before {
			t.Fatalf("switchover %d: primary still %s", i+1, before)
		}
		tok := mdbAcquireSoon(t, b, "a")
		if tok <= last {
			t.Errorf("switchover %d: token %d after %d", i+1, tok, last)
		}
		last = tok
		t.Logf("switchover %d: %s now primary, in %v; token %d", i+1, m.Primary(), m.LastPromotion(), tok)
	}
	// A promotion after switchovers still works.
	if err := m.Inject(ctx, Promote); err != nil {
		t.Fatal(err)
	}
	if tok := mdbAcquireSoon(t, b, "a"); tok <= last {
		t.Errorf("promotion after the switchovers: token %d after %d", tok, last)
	}
}
