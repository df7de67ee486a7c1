package simbapg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRetryOutlastsSerializationFailures: a statement that keeps failing
// with a serialization failure (a keep-alive reading the leases of a
// session whose acquires and releases keep writing, at SERIALIZABLE) is
// run again while its ctx lasts, after pauses that let the writers pass,
// not given up after a fixed number of immediate tries while the call
// still had time; and it is given up before the ctx's deadline.
func TestRetryOutlastsSerializationFailures(t *testing.T) {
	serialization := &pgconn.PgError{Code: "40001"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	err := retry(ctx, func() error {
		if calls++; calls <= 30 {
			return serialization
		}
		return nil
	})
	if err != nil || calls != 31 {
		t.Fatalf("retry of a statement that failed 30 times, then ran = %v after %d runs; want nil after 31", err, calls)
	}

	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	err = retry(short, func() error { return serialization })
	if took := time.Since(start); !errors.Is(err, serialization) || took > 50*time.Millisecond+20*time.Millisecond {
		t.Fatalf("retry of a statement that always fails = %v after %v; want the failure by the deadline (50ms)", err, took)
	}

	calls = 0
	err = retry(ctx, func() error {
		calls++
		return &pgconn.PgError{Code: "40P01"}
	})
	if calls != deadlockRetries || err == nil {
		t.Fatalf("retry of a statement that always deadlocks = %v after %d runs; want the error after %d", err, calls, deadlockRetries)
	}
}
