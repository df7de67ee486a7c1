package simbasql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	simba "github.com/simba-go/simba/core"
)

// renewSQL renews a session by hand, as a keep-alive would.
func (f *fixture) renewSQL() string {
	if f.dialect == Postgres {
		return "UPDATE " + f.prefix + "session SET expires_at = now() + interval '1 minute' WHERE id = $1"
	}
	return "UPDATE " + f.prefix + "session SET expires_at = UTC_TIMESTAMP(6) + INTERVAL 60 SECOND WHERE id = ?"
}

// expire ends session s now, as if its last keep-alive had lapsed.
func (f *fixture) expire(s simba.SessionID) {
	f.t.Helper()
	q := "UPDATE " + f.prefix + "session SET expires_at = now() - interval '1 second' WHERE id = $1"
	if f.dialect == MySQL {
		q = "UPDATE " + f.prefix + "session SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?"
	}
	if err := f.admin.exec(ctxT(f.t), q, string(s)); err != nil {
		f.t.Fatalf("expire session: %v", err)
	}
}

// TestTakeOverWaitsForRenewalInFlight: the owner's keep-alive has renewed
// its session but not committed yet when the session's old expiry passes.
// A candidate's Acquire must wait for that renewal and lose, never take
// the lease over from a session that ends up renewed. A stale snapshot
// (PostgreSQL's statement snapshot, InnoDB's REPEATABLE READ read view)
// would show the old expiry and hand the lease to both.
func TestTakeOverWaitsForRenewalInFlight(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		b := f.backend()
		const lease = 700 * time.Millisecond
		owner := open(t, b, lease)
		opened := time.Now()
		tok := acquire(t, b, owner, "n").Token
		cand := open(t, b, time.Minute)

		commit, err := f.admin.execInTx(ctxT(t), f.renewSQL(), string(owner))
		if err != nil {
			t.Fatalf("renewal in a transaction: %v", err)
		}
		time.Sleep(time.Until(opened.Add(lease + 200*time.Millisecond)))

		type result struct {
			r   simba.AcquireResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := b.Acquire(ctxT(t), cand, "n")
			done <- result{r, err}
		}()
		select {
		case res := <-done:
			_ = commit() // only frees the held rows: the test fails either way
			t.Fatalf("Acquire returned %+v, %v while the owner's renewal was in flight: it did not wait for it", res.r, res.err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		res := <-done
		if res.err != nil {
			t.Fatalf("Acquire: %v", res.err)
		}
		if res.r.Won {
			t.Fatalf("the lease was taken over (token %d) from a session whose renewal committed", res.r.Token)
		}
		if got := keepAlive(t, b, owner, lease).Leases; got["n"] != tok {
			t.Fatalf("owner's leases = %v, want n:%d", got, tok)
		}
	})
}

// singleConn returns a backend whose client has exactly one connection,
// and a function that reports that connection's server-side id.
func (f *fixture) singleConn() (*Backend, func() int64) {
	f.t.Helper()
	ctx := ctxT(f.t)
	switch f.dialect {
	case Postgres:
		cfg, err := pgxpool.ParseConfig(f.raw)
		if err != nil {
			f.t.Fatal(err)
		}
		cfg.MaxConns, cfg.MinConns = 1, 0
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(pool.Close)
		b, err := NewPostgres(pool, Options{TablePrefix: f.prefix, Migrate: true})
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { b.Close() })
		return b, func() int64 {
			var pid int32
			if err := pool.QueryRow(ctxT(f.t), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				f.t.Fatal(err)
			}
			return int64(pid)
		}
	default:
		db, err := sql.Open("mysql", f.raw)
		if err != nil {
			f.t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		f.t.Cleanup(func() { db.Close() })
		b, err := NewMySQL(db, Options{TablePrefix: f.prefix, Migrate: true})
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { b.Close() })
		return b, func() int64 {
			var id int64
			if err := db.QueryRowContext(ctxT(f.t), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				f.t.Fatal(err)
			}
			return id
		}
	}
}

// kill ends a client connection from the server side.
func (f *fixture) kill(id int64) {
	f.t.Helper()
	var err error
	if f.dialect == Postgres {
		var ok bool
		err = f.admin.scalar(ctxT(f.t), "SELECT pg_terminate_backend($1)", &ok, int32(id))
		if err == nil && !ok {
			err = fmt.Errorf("backend %d not terminated", id)
		}
	} else {
		err = f.admin.exec(ctxT(f.t), fmt.Sprintf("KILL %d", id)) // KILL takes no placeholder; id is an integer
	}
	if err != nil {
		f.t.Fatalf("kill connection %d: %v", id, err)
	}
}

// wantRecovery retries op a few times: after a killed connection the
// client must reconnect by itself. Failures on the way must be this
// package's transient errors, never ErrSessionExpired.
func wantRecovery(t *testing.T, what string, op func() error) {
	t.Helper()
	var err error
	for range 5 {
		if err = op(); err == nil {
			return
		}
		if errors.Is(err, simba.ErrSessionExpired) || !strings.HasPrefix(err.Error(), "simbasql: ") {
			t.Fatalf("%s after a killed connection: %v, want a transient simbasql error", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not recover after a killed connection: %v", what, err)
}

// TestKilledConnection: the server kills the backend's only connection,
// once between calls and once during a call blocked on a row lock. The
// blocked call returns an error at once, and the backend recovers on a
// new connection with the session and its lease intact.
func TestKilledConnection(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		b, connID := f.singleConn()
		const lease = 30 * time.Second
		s := open(t, b, lease)
		tok := acquire(t, b, s, "n").Token

		f.kill(connID())
		wantRecovery(t, "keep-alive", func() error {
			r, err := b.KeepAlive(ctxT(t), s, lease)
			if err == nil && r.Leases["n"] != tok {
				t.Fatalf("leases after reconnect = %v, want n:%d", r.Leases, tok)
			}
			return err
		})

		// Block a keep-alive behind a lock on its session row, then kill
		// its connection while it waits.
		id := connID()
		commit, err := f.admin.execInTx(ctxT(t), f.renewSQL(), string(s))
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := b.KeepAlive(ctx, s, lease)
			errc <- err
		}()
		time.Sleep(200 * time.Millisecond)
		f.kill(id)
		select {
		case err := <-errc:
			if errors.Is(err, simba.ErrSessionExpired) {
				t.Fatalf("keep-alive on a killed connection: %v, want a transient error", err)
			}
			t.Logf("keep-alive on a killed connection: %v", err)
		case <-time.After(4 * time.Second):
			_ = commit() // only frees the held rows: the test fails either way
			t.Fatal("a keep-alive whose connection was killed did not return within 4s")
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		wantRecovery(t, "acquire", func() error {
			r, err := b.Acquire(ctxT(t), s, "n")
			if err == nil && (!r.Won || r.Token != tok+1) {
				t.Fatalf("acquire by the owner after reconnect = %+v, want token %d", r, tok+1)
			}
			return err
		})
	})
}

// TestWrongCredentials: Open fails with a clear error that does not
// contain the password.
func TestWrongCredentials(t *testing.T) {
	forEachDialect(t, func(t *testing.T, f *fixture) {
		const secret = "Sup3r-s3cret-pw"
		raw := f.openURL()
		scheme, rest, _ := strings.Cut(raw, "://")
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		bad := scheme + "://simba_no_such_user:" + secret + "@" + rest
		for _, c := range []struct {
			name string
			url  string
			opts Options
		}{
			{"password in URL", bad, Options{}},
			{"password in Options", scheme + "://simba_no_such_user@" + rest, Options{Password: secret}},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				b, err := Open(ctx, c.url, c.opts)
				if err == nil {
					b.Close()
					t.Fatal("Open with a user that does not exist succeeded")
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows the password: %v", err)
				}
				if !strings.HasPrefix(err.Error(), "simbasql: connect: ") {
					t.Fatalf("error = %v, want a simbasql: connect: error", err)
				}
				t.Logf("%v", err)
			})
		}
	})
}
