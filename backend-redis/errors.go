package simbaredis

import (
	"errors"
	"strings"

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
)

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
	if errors.As(err, &rerr) {
		if i := strings.Index(msg, " script: "); i > 0 {
			msg = msg[:i]
		}
	}
	return msg
}
