package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrClosed is returned by every method of a Backend after Close.
	ErrClosed = errors.New("simbaredis: backend closed")

	// ErrWrongType is matched by the error of an operation that met a key
	// under the key prefix holding another Redis type than Simba writes
	// there (something else wrote into Simba's key space). The message
	// names the key.
	ErrWrongType = errors.New("simbaredis: key holds the wrong type")

	// ErrAuth is matched by the error of an operation the server refused
	// for authentication or permission reasons (NOAUTH, WRONGPASS, NOPERM,
	// or an ACL refusal of a command inside a script).
	ErrAuth = errors.New("simbaredis: authentication or permission refused")

	// ErrNotReplicated is matched by the error of an Acquire or KeepAlive
	// whose write fewer replicas than Options.MinReplicas acknowledged
	// within Options.ReplicaTimeout: a failover could lose it. An Acquire
	// gave the term back; a KeepAlive renewed the session on the primary
	// only. The engine treats both as failed calls and tries again.
	ErrNotReplicated = errors.New("simbaredis: write not acknowledged by enough replicas")
)

// replicaError is the error of a call whose WAIT saw too few replicas.
type replicaError struct {
	op      string
	acked   int64
	want    int
	timeout time.Duration
	err     error // the WAIT's own failure, if it had one
}

func (e *replicaError) Error() string {
	what := "the session was renewed on the primary only"
	if strings.HasPrefix(e.op, "acquire") {
		what = "the term was given back"
	}
	if e.err != nil {
		return fmt.Sprintf("simbaredis: %s: waiting for %d replicas to acknowledge the write failed (%s); %s",
			e.op, e.want, serverMessage(e.err), what)
	}
	return fmt.Sprintf("simbaredis: %s: %d of %d replicas acknowledged the write within %v; %s",
		e.op, e.acked, e.want, e.timeout, what)
}

func (e *replicaError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrNotReplicated}
	}
	return []error{ErrNotReplicated, e.err}
}

// opError is the error of a failed operation: what was being done, a
// classification the caller can match with errors.Is (may be nil), and the
// driver's error, which stays reachable through errors.As.
type opError struct {
	op   string
	kind error
	err  error
}

func (e *opError) Error() string {
	return "simbaredis: " + e.op + ": " + serverMessage(e.err)
}

func (e *opError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// wrapErr classifies err, the failure of op, or returns nil for nil.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var kind error
	switch {
	case errors.Is(err, redis.ErrClosed):
		kind = ErrClosed
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		kind = ErrWrongType
	case redis.HasErrorPrefix(err, "NOAUTH"), redis.HasErrorPrefix(err, "WRONGPASS"), redis.HasErrorPrefix(err, "NOPERM"),
		// an ACL refusal inside a script
		redis.HasErrorPrefix(err, "The user executing the script can't"):
		kind = ErrAuth
	}
	return &opError{op: op, kind: kind, err: err}
}

// serverMessage is err's text without the script digest and line that
// Redis appends to errors raised inside a script.
func serverMessage(err error) string {
	msg := err.Error()
	var rerr redis.Error
	if i := strings.Index(msg, " script: "); i > 0 && errors.As(err, &rerr) {
		msg = msg[:i]
	}
	return msg
}

// typedKey is a key an operation touches and the type Simba writes there.
type typedKey struct{ key, kind string }

// wrongType is the error of a script that a key of the wrong type stopped:
// it names the key, which the server's WRONGTYPE error does not.
type wrongType struct {
	key, holds, kind string
	err              error // the server's error
}

func (e *wrongType) Error() string {
	return "WRONGTYPE key " + e.key + " holds a " + e.holds + ", not a " + e.kind
}

func (e *wrongType) Unwrap() error { return e.err }

// wrapScriptErr is wrapErr for the scripts that call Redis without
// catching a WRONGTYPE error (acquire and release, whose every step
// counts): on such an error it asks the server for the type of each key
// and names the first that holds another than Simba's. Only failed calls
// pay for the lookup.
func (b *Backend) wrapScriptErr(ctx context.Context, op string, err error, keys ...typedKey) error {
	if err == nil || !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return wrapErr(op, err)
	}
	pipe := b.client.Pipeline()
	cmds := make([]*redis.StatusCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Type(ctx, k.key)
	}
	_, _ = pipe.Exec(ctx) // each reply is read below
	for i, k := range keys {
		if t, terr := cmds[i].Result(); terr == nil && t != "none" && t != k.kind {
			return &opError{op: op, kind: ErrWrongType, err: &wrongType{key: k.key, holds: t, kind: k.kind, err: err}}
		}
	}
	return wrapErr(op, err)
}
