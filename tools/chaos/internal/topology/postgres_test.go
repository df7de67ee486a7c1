package topology

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// TestPostgresReplicaPromotesBackAndForth starts the pair and promotes
// twice, so that each node is primary once more: a row written before each
// promotion is on the new primary (acknowledged by the standby with Sync,
// seen on it without), the URL reaches the
// primary of the moment, and the old primary comes back as a replica.
func TestPostgresReplicaPromotesBackAndForth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	defer goleak.VerifyNone(t)
	for _, sync := range []bool{false, true} {
		name := map[bool]string{false: "async", true: "sync"}[sync]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			p, err := StartPostgresReplica(ctx, t.TempDir(), PostgresOptions{Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := p.Down(context.Background()); err != nil {
					t.Error(err)
				}
			}()
			if got, want := p.Name(), "postgres-"+name; got != want {
				t.Errorf("Name() = %q, want %q", got, want)
			}
			if p.TokensMayGoBack() == sync {
				t.Errorf("TokensMayGoBack() = %v with Sync %v", p.TokensMayGoBack(), sync)
			}
			if err := p.Inject(ctx, PrimaryKill); !errors.Is(err, ErrUnknownFault) {
				t.Errorf("Inject(%q) = %v, want ErrUnknownFault", PrimaryKill, err)
			}
			pgExec(ctx, t, p.URL(), "CREATE TABLE topo_t (n int)")
			for i := range 2 {
				before := p.Primary()
				pgExec(ctx, t, p.URL(), "INSERT INTO topo_t VALUES ($1)", i)
				if !sync {
					// Asynchronous: the insert may not have reached the
					// replica yet, and would be lost; wait for it.
					replica := p.Addrs()[0]
					if replica == before {
						replica = p.Addrs()[1]
					}
					for pgCount(ctx, "postgres://postgres@"+replica+"/postgres?sslmode=disable") != i+1 {
						if ctx.Err() != nil {
							t.Fatalf("the replica %s never saw row %d", replica, i)
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
				if err := p.Inject(ctx, Promote); err != nil {
					t.Fatal(err)
				}
				if p.Primary() == before {
					t.Fatalf("primary still %s after promotion %d", before, i+1)
				}
				var n int
				pgQueryRow(ctx, t, p.URL(), "SELECT count(*) FROM topo_t").Scan(&n)
				if n != i+1 {
					t.Errorf("after promotion %d the new primary has %d rows, want %d", i+1, n, i+1)
				}
				var addr string
				pgQueryRow(ctx, t, p.URL(), "SELECT inet_server_addr()::text || ':' || current_setting('port')").Scan(&addr)
				if addr != "127.0.0.1/32:"+p.Primary()[len("127.0.0.1:"):] {
					t.Errorf("the URL reached %s, want the primary %s", addr, p.Primary())
				}
				// The old primary is a streaming replica again.
				var recovery bool
				pgQueryRow(ctx, t, "postgres://postgres@"+before+"/postgres?sslmode=disable", "SELECT pg_is_in_recovery()").Scan(&recovery)
				if !recovery {
					t.Errorf("the old primary %s is not in recovery", before)
				}
			}
		})
	}
}

type pgScanner struct {
	t   *testing.T
	row pgx.Row
	c   *pgx.Conn
}

func (s pgScanner) Scan(dst ...any) {
	s.t.Helper()
	defer s.c.Close(context.Background())
	if err := s.row.Scan(dst...); err != nil {
		s.t.Fatal(err)
	}
}

func pgQueryRow(ctx context.Context, t *testing.T, url, q string, args ...any) pgScanner {
	t.Helper()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return pgScanner{t: t, row: c.QueryRow(ctx, q, args...), c: c}
}

func pgExec(ctx context.Context, t *testing.T, url, q string, args ...any) {
	t.Helper()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, q, args...); err != nil {
		t.Fatal(err)
	}
}

// pgCount is the number of rows of topo_t at url, -1 when it cannot be
// read (yet).
func pgCount(ctx context.Context, url string) int {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return -1
	}
	defer c.Close(ctx)
	n := -1
	if err := c.QueryRow(ctx, "SELECT count(*) FROM topo_t").Scan(&n); err != nil {
		return -1
	}
	return n
}
