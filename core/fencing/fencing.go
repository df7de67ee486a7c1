// Package fencing guards in-process state with fencing tokens.
//
// A term's validity is only a hint: a holder paused by a garbage
// collection or a stalled disk can wake up after another node won a newer
// term and still finish a write it had started. The protected resource is
// the only place that can refuse such a stale write, by remembering the
// highest token it accepted (R-FEN-1). [Value] does that for state held in
// one process: the token check and the write happen under one mutex, so no
// stale owner can slip in between them.
//
// Pass term.Token() with every write. A write is accepted when its token
// is at least the highest accepted so far; equal tokens are accepted
// because retries within one term carry the same token.
//
// Value passes the fencing test kit in package
// github.com/simba-go/simba/core/fencingtest.
package fencing

import "sync"

// Value holds one value of type T together with the highest fencing token
// that wrote it. The zero Value holds the zero T and token 0, and is ready
// to use. A Value must not be copied after first use.
//
// All methods are safe for concurrent use.
type Value[T any] struct {
	mu    sync.Mutex
	token uint64
	v     T
}

// Write stores v and records token if token is at least the highest token
// accepted so far, and reports whether it did. A rejected write leaves the
// value and the token as they were. The check and the store are one atomic
// step.
func (x *Value[T]) Write(token uint64, v T) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if token < x.token {
		return false
	}
	x.token = token
	x.v = v
	return true
}

// Update calls f with a pointer to the stored value if token is at least
// the highest token accepted so far, records token, and reports whether it
// did. f runs under the Value's lock: it may change the value in place, but
// must not call methods of the same Value and should return quickly. The
// token is recorded before f runs, so even an f that panics leaves the
// newer token in place and any later stale write is still refused. When
// the token is stale, f is not called; a nil f only records the token.
func (x *Value[T]) Update(token uint64, f func(*T)) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if token < x.token {
		return false
	}
	x.token = token
	if f != nil {
		f(&x.v)
	}
	return true
}

// Load returns the stored value and the highest token accepted so far, read
// together. It returns the zero T and 0 before the first accepted write.
func (x *Value[T]) Load() (T, uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.v, x.token
}
