package simbamysql

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/backendtest"
)

// fakeVariable makes serverVariables report name = value, over what the
// server says, for the test.
func fakeVariable(t *testing.T, name, value string) {
	t.Helper()
	prev := serverVariables
	serverVariables = func(ctx context.Context, db *sql.DB) (map[string]string, error) {
		vars, err := prev(ctx, db)
		if err != nil {
			return nil, err
		}
		vars[name] = value
		return vars, nil
	}
	t.Cleanup(func() { serverVariables = prev })
}

func codes(ws []simba.Warning) string {
	var c []string
	for _, w := range ws {
		c = append(c, w.Code)
	}
	return strings.Join(c, ",")
}

// TestSetupWarnings: the test server (MariaDB at REPEATABLE READ, no
// Galera) gets no warning; READ UNCOMMITTED, set for the connections by
// the DSN, gets WarnIsolation; a Galera node gets WarnGalera. A Galera
// cluster needs the galera-4 library and three nodes: wsrep_on = ON is
// faked over the real answer (which on MariaDB has wsrep_on = OFF).
func TestSetupWarnings(t *testing.T) {
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := newDB(t, raw, 1)
	vars, err := serverVariables(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if on, ok := vars["wsrep_on"]; ok && on != "OFF" {
		t.Fatalf("wsrep_on = %q on the test server", on)
	}
	if got := setupWarnings(ctx, db); len(got) != 0 {
		t.Fatalf("warnings %s on the test server", codes(got))
	}

	ru := newDB(t, withIsolation(t, raw, "READ-UNCOMMITTED"), 1)
	if got := codes(setupWarnings(ctx, ru)); got != WarnIsolation {
		t.Errorf("READ UNCOMMITTED: warnings %q, want %q", got, WarnIsolation)
	}
	for _, level := range []string{"READ-COMMITTED", "SERIALIZABLE"} {
		if got := setupWarnings(ctx, newDB(t, withIsolation(t, raw, level), 1)); len(got) != 0 {
			t.Errorf("%s: warnings %s", level, codes(got))
		}
	}

	fakeVariable(t, "wsrep_on", "ON")
	got := setupWarnings(ctx, db)
	if codes(got) != WarnGalera || !strings.Contains(got[0].Message, "wsrep_on = ON") {
		t.Errorf("Galera: warnings %+v, want %q", got, WarnGalera)
	}
}

// TestReadUncommittedHolderSeesRolledBackOwner shows what WarnIsolation
// warns of: at READ UNCOMMITTED, Holder reports as the holder a session
// that an uncommitted transaction wrote into the lease row, and that
// never held the lease once it rolls back, and the owner's keep-alive
// reply drops the lease; at the server's default both report the
// committed holder.
func TestReadUncommittedHolderSeesRolledBackOwner(t *testing.T) {
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const prefix = "warnru_"
	open := func(dsn string) *Backend {
		b, err := New(newDB(t, dsn, 4), Options{TablePrefix: prefix, Migrate: true, CleanupInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	committed := open(raw)
	dirty := open(withIsolation(t, raw, "READ-UNCOMMITTED"))
	owner, err := committed.OpenSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other, err := committed.OpenSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	name := "ru-" + strings.ToLower(string(owner.ID)[:8])
	won, err := committed.Acquire(ctx, owner.ID, name)
	if err != nil || !won.Won {
		t.Fatalf("acquire: %v, %v", won, err)
	}
	held := simba.KeepAliveRequest{Lease: time.Minute, Held: map[string]uint64{name: won.Token}, Generation: 1}
	tx, err := newDB(t, raw, 1).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "UPDATE "+prefix+"lease SET session_id = ? WHERE name = ?", string(other.ID), name); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := dirty.Holder(ctx, name); err != nil || !ok || h.Session != other.ID {
		t.Errorf("READ UNCOMMITTED: Holder = %+v, %v, %v; want the uncommitted owner %s", h, ok, err, other.ID)
	}
	if h, ok, err := committed.Holder(ctx, name); err != nil || !ok || h.Session != owner.ID {
		t.Errorf("REPEATABLE READ: Holder = %+v, %v, %v; want the committed owner %s", h, ok, err, owner.ID)
	}
	// The owner's keep-alive, read dirty, reports its lease lost: the
	// engine would end the term as TAKEN_OVER.
	if r, err := dirty.KeepAlive(ctx, owner.ID, held); err != nil {
		t.Fatal(err)
	} else if !slices.Equal(r.Lost, []string{name}) {
		t.Errorf("READ UNCOMMITTED: the keep-alive lost %v, want %s", r.Lost, name)
	}
	if r, err := committed.KeepAlive(ctx, owner.ID, held); err != nil {
		t.Fatal(err)
	} else if len(r.Lost) != 0 {
		t.Errorf("REPEATABLE READ: the keep-alive lost %v, want nothing", r.Lost)
	}
}

// TestOpenSessionWarnsThroughTheEngine: the grant of OpenSession carries
// the warnings (READ UNCOMMITTED for real, Galera faked), and a client of the backend logs it and publishes it as an
// EventBackendWarning once per session.
func TestOpenSessionWarnsThroughTheEngine(t *testing.T) {
	raw := backendtest.ServerEnv(t, "SIMBA_TEST_MYSQL_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := New(newDB(t, raw, 4), Options{TablePrefix: "warnengine_", Migrate: true, CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g, err := b.OpenSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Warnings) != 0 {
		t.Fatalf("warnings %v on the test server", g.Warnings)
	}
	ru, err := New(newDB(t, withIsolation(t, raw, "READ-UNCOMMITTED"), 2),
		Options{TablePrefix: "warnengine_", CleanupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ru.Close()
	if g, err := ru.OpenSessionAs(ctx, time.Minute, "ru"); err != nil || codes(g.Warnings) != WarnIsolation {
		t.Fatalf("OpenSessionAs at READ UNCOMMITTED: %v, %v; want %s", g.Warnings, err, WarnIsolation)
	}
	fakeVariable(t, "wsrep_on", "ON")
	if g, err = b.OpenSession(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if codes(g.Warnings) != WarnGalera {
		t.Fatalf("OpenSession: warnings %v, want %s", g.Warnings, WarnGalera)
	}

	events := make(chan simba.Event, 100)
	var logs backendtest.LogBuffer
	c, err := simba.New(b, simba.WithLogger(logs.Logger()),
		simba.WithConfig(simba.Config{LeaseDuration: 3 * time.Second}),
		simba.WithEventListener(func(_ context.Context, e simba.Event) {
			if e.Kind == simba.EventBackendWarning {
				events <- e
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	lt, err := c.Lock("warned").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = lt.Release(ctx)
	time.Sleep(2 * time.Second) // keep-alives: no second warning
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	close(events)
	var got []simba.Event
	for e := range events {
		got = append(got, e)
	}
	if len(got) != 1 || got[0].Warning.Code != WarnGalera || got[0].Session != lt.Session() {
		t.Fatalf("events %+v, want one %s for session %s", got, WarnGalera, lt.Session())
	}
	if n := strings.Count(logs.String(), WarnGalera); n != 1 {
		t.Errorf("the warning is logged %d times:\n%s", n, logs.String())
	}
}
