package sqltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/simba-go/simba/core/fencingtest"
)

// FenceClient is one kind of client a Fence is used with.
type FenceClient struct {
	Name string
	// Open connects a new client to the server named by raw and returns it
	// with the package's fence of table, whose columns are key, token and
	// value (the one column a write sets).
	Open func(raw, table string) (FenceConn, error)
}

// FenceConn is a client with a Fence.
type FenceConn interface {
	Init(ctx context.Context, key string) error
	Write(ctx context.Context, key string, token uint64, value string) (bool, error)
	// InTx runs fn in a transaction, committed when commit is set and fn
	// succeeds, rolled back otherwise; write writes within it.
	InTx(ctx context.Context, commit bool, fn func(write WriteFunc) error) error
	Close() error
}

// WriteFunc is a fenced write.
type WriteFunc func(key string, token uint64, value string) (bool, error)

// fenceFixture is a test table, dropped when the test ends, and a client
// with a fence of it.
type fenceFixture struct {
	f      *fixture
	client FenceClient
	table  string
	conn   FenceConn
	keys   atomic.Int64
}

func newFenceFixture(t testing.TB, f *fixture, c FenceClient) *fenceFixture {
	t.Helper()
	x := &fenceFixture{f: f, client: c, table: "fence_" + strings.TrimSuffix(uniquePrefix(), "_")}
	create := x.quoted(`CREATE TABLE "` + x.table + `" ("key" varchar(64) PRIMARY KEY, "token" bigint NOT NULL DEFAULT 0, "value" text)`)
	drop := x.quoted(`DROP TABLE IF EXISTS "` + x.table + `"`)
	if err := f.admin.Exec(ctxT(t), create); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		if err := f.admin.Exec(context.Background(), drop); err != nil {
			t.Logf("drop %s: %v", x.table, err)
		}
	})
	x.conn = x.connect(t)
	return x
}

// quoted returns q with its double quotes replaced by the server's quote
// of identifiers.
func (x *fenceFixture) quoted(q string) string { return strings.ReplaceAll(q, `"`, x.f.h.Quote) }

// connect returns a new client, closed when t ends.
func (x *fenceFixture) connect(t testing.TB) FenceConn {
	t.Helper()
	conn, err := x.client.Open(x.f.raw, x.table)
	if err != nil {
		t.Fatalf("open %s: %v", x.client.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// newKey returns a key no other row of the table has, its row created.
func (x *fenceFixture) newKey(t testing.TB) string {
	t.Helper()
	key := fmt.Sprintf("k%d", x.keys.Add(1))
	if err := x.conn.Init(ctxT(t), key); err != nil {
		t.Fatalf("Init(%s): %v", key, err)
	}
	return key
}

// row reads the token and value of key, through the test's own client.
func (x *fenceFixture) row(ctx context.Context, key string) (uint64, string, error) {
	q := x.quoted(`SELECT "token", COALESCE("value", '') FROM "` + x.table + `" WHERE "key" = ?`)
	var token int64
	var value string
	err := x.f.admin.Scan(ctx, q, []any{key}, &token, &value)
	return uint64(token), value, err
}

// fenceResource adapts one row to the fencing test kit.
type fenceResource struct {
	x    *fenceFixture
	conn FenceConn
	key  string
}

func (r *fenceResource) Write(ctx context.Context, token uint64, value string) (bool, error) {
	return r.conn.Write(ctx, r.key, token, value)
}

func (r *fenceResource) State(ctx context.Context) (uint64, string, error) {
	return r.x.row(ctx, r.key)
}

// Reopen writes through a new client, with a new fence.
func (r *fenceResource) Reopen(context.Context) (fencingtest.Resource, error) {
	conn, err := r.x.client.Open(r.x.f.raw, r.x.table)
	if err != nil {
		return nil, err
	}
	return &fenceResource{x: r.x, conn: conn, key: r.key}, nil
}

func (r *fenceResource) Close() error { return r.conn.Close() }

func testFenceRowMissing(t *testing.T, f *fixture) {
	for _, c := range f.h.Fences {
		t.Run(c.Name, func(t *testing.T) {
			x := newFenceFixture(t, f, c)
			ok, err := x.conn.Write(ctxT(t), "never-created", 1, "v")
			if ok || !errors.Is(err, f.h.Pkg.ErrFenceRowMissing) {
				t.Errorf("Write to a missing row = %t, %v; want ErrFenceRowMissing", ok, err)
			}
			key := x.newKey(t)
			if err := x.conn.Init(ctxT(t), key); err != nil {
				t.Errorf("second Init of %s: %v", key, err)
			}
		})
	}
}

// testFenceInTransaction checks the pattern the Fence doc recommends: a
// fenced write first in a transaction fences the whole transaction, and
// rolls back with it.
func testFenceInTransaction(t *testing.T, f *fixture) {
	for _, c := range f.h.Fences {
		t.Run(c.Name, func(t *testing.T) {
			x := newFenceFixture(t, f, c)
			ctx := ctxT(t)
			key := x.newKey(t)
			// outcome says what is wrong when a write did not end as wanted.
			outcome := func(what string, want, ok bool, err error) error {
				switch {
				case err != nil:
					return fmt.Errorf("%s = %t, %w; want %t", what, ok, err, want)
				case ok != want:
					return fmt.Errorf("%s = %t, <nil>; want %t", what, ok, want)
				}
				return nil
			}
			write := func(token uint64, value string, want bool) error {
				ok, err := x.conn.Write(ctx, key, token, value)
				return outcome(fmt.Sprintf("Write(%d, %q)", token, value), want, ok, err)
			}
			if err := write(3, "term-3", true); err != nil {
				t.Fatal(err)
			}

			// A transaction of term 5 that rolls back leaves token 3.
			err := x.conn.InTx(ctx, false, func(txWrite WriteFunc) error {
				ok, err := txWrite(key, 5, "term-5 rolled back")
				return outcome("token 5 in the transaction", true, ok, err)
			})
			if err == nil {
				err = write(4, "term-4", true)
			}
			if err != nil {
				t.Fatal(err)
			}

			// A transaction of term 6 holds the row until it commits; a
			// concurrent term-5 write then compares with 6 and is refused.
			late := make(chan error, 1)
			err = x.conn.InTx(ctx, true, func(txWrite WriteFunc) error {
				ok, err := txWrite(key, 6, "term-6")
				if err := outcome("token 6 in the transaction", true, ok, err); err != nil {
					late <- nil
					return err
				}
				go func() { late <- write(5, "term-5 late", false) }()
				ok, err = txWrite(key, 6, "term-6 second step")
				return outcome("token 6 for the second step", true, ok, err)
			})
			if lateErr := <-late; lateErr != nil {
				t.Error(lateErr)
			}
			if err != nil {
				t.Fatal(err)
			}
			token, value, err := x.row(ctx, key)
			if err != nil || token != 6 || value != "term-6 second step" {
				t.Errorf("row = (%d, %q), %v; want (6, %q)", token, value, err, "term-6 second step")
			}
		})
	}
}
