package simbapg

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("SIMBA_IN_TERM_HOLDER"); spec != "" {
		os.Exit(runInTermHolder(spec)) // a holder process of in_term_test.go
	}
	goleak.VerifyTestMain(m)
}

// newPool returns a pool on raw, closed when t ends.
func newPool(t testing.TB, raw string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		cfg.MaxConns, cfg.MinConns = maxConns, 0
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func parseURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("SIMBA_TEST_POSTGRES_URL: %v", err)
	}
	return u
}
