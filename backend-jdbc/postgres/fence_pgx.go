package simbapg

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PgxHandle is what a Fence needs from a pgx handle: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all have it.
type PgxHandle interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// InitPgx is Init on a pgx handle.
func (f *Fence) InitPgx(ctx context.Context, db PgxHandle, key any) error {
	if db == nil {
		return f.f.NilHandle()
	}
	return f.f.Init(ctx, pgxRunner{db}, key)
}

// WritePgx is Write on a pgx handle.
func (f *Fence) WritePgx(ctx context.Context, db PgxHandle, key any, token uint64, values ...any) (accepted bool, err error) {
	if db == nil {
		return false, f.f.NilHandle()
	}
	return f.f.Write(ctx, pgxRunner{db}, key, token, values)
}

type pgxRunner struct{ db PgxHandle }

func (p pgxRunner) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := p.db.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (p pgxRunner) Token(ctx context.Context, q string, args ...any) (int64, bool, error) {
	var v int64
	err := p.db.QueryRow(ctx, q, args...).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}
