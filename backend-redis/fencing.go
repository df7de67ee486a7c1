package simbaredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// ErrInvalidFence is matched (with errors.Is) by the errors of NewFence.
var ErrInvalidFence = errors.New("simbaredis: invalid fence")

// Fence is a value kept in Redis that accepts a write only when the write's
// fencing token is at least the highest token it has accepted (R-FEN-1).
// Pass term.Token() with every write: a holder that lost its term while
// paused, and writes after a newer holder did, is refused.
//
// A fence named resource keeps two string keys in one hash slot:
// {resource}:token, the highest accepted token in decimal, and
// {resource}:value. Every write is one Lua script, so the check and the
// store are a single atomic step, also on Redis Cluster. Tokens are
// compared exactly as decimal strings, never as Lua numbers, which would
// round tokens above 2^53. Equal tokens are accepted, so a retry within one
// term succeeds. The keys never expire.
//
// A fence is only as durable as the Redis that holds it: asynchronous
// replication or key eviction can lose an accepted token after a failover,
// and a stale writer can then pass. Keep fences on an instance with
// noeviction, as the backend's own keys, and read the module's README on
// failover.
//
// A Fence is safe for concurrent use.
type Fence struct {
	client   redis.Scripter
	tokenKey string
	valueKey string
}

// NewFence returns the fence named resource on client, which stays the
// caller's. resource follows the lease name rules (1 to 128 characters of
// [A-Za-z0-9._:-]), so it can never break the {resource} hash tag. Any
// go-redis client that can run scripts works: *redis.Client,
// *redis.ClusterClient, *redis.Ring or a *redis.Tx.
//
// NewFence does not contact the server. It fails on a nil client or an
// invalid name, with an error matching ErrInvalidFence.
func NewFence(client redis.Scripter, resource string) (*Fence, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidFence)
	}
	if err := simba.ValidateName(resource); err != nil {
		return nil, fmt.Errorf("%w: resource: %w", ErrInvalidFence, err)
	}
	tag := "{" + resource + "}"
	return &Fence{client: client, tokenKey: tag + ":token", valueKey: tag + ":value"}, nil
}

// fenceWriteScript stores ARGV[2] in KEYS[2] and ARGV[1] in KEYS[1] unless
// ARGV[1] is a lower token than KEYS[1] holds. Tokens are canonical
// decimal strings (no sign, no leading zero), compared by above.
var fenceWriteScript = redis.NewScript(luaAbove + `
local cur = redis.call('GET', KEYS[1])
if cur then
  if cur ~= '0' and not string.match(cur, '^[1-9]%d*$') then
    return redis.error_reply('ERR fence token key ' .. KEYS[1] .. ' does not hold a token')
  end
  if above(cur, ARGV[1]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1
`)

// fenceReadScript returns the token and the value, read together. GET,
// unlike MGET, fails on a key of another type instead of reading it as
// missing.
var fenceReadScript = redis.NewScript(`return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}`)

// Write stores value and records token if token is at least the highest
// token the fence has accepted, in one atomic step, and reports whether it
// did. A stale write returns false and a nil error and changes nothing.
// A fresh fence has token 0.
//
// An error means the outcome is unknown: the script may or may not have
// run, for example when ctx ended while the reply was on its way.
func (f *Fence) Write(ctx context.Context, token uint64, value string) (accepted bool, err error) {
	n, err := fenceWriteScript.Run(ctx, f.client, []string{f.tokenKey, f.valueKey},
		strconv.FormatUint(token, 10), value).Int64()
	if err != nil {
		return false, wrapErr("fenced write to "+f.tokenKey, err)
	}
	return n == 1, nil
}

// Read returns the highest accepted token and the value of the last
// accepted write, read together in one step: 0 and "" before the first.
func (f *Fence) Read(ctx context.Context) (token uint64, value string, err error) {
	op := "fenced read of " + f.tokenKey
	vals, err := fenceReadScript.Run(ctx, f.client, []string{f.tokenKey, f.valueKey}).Slice()
	if err != nil {
		return 0, "", wrapErr(op, err)
	}
	if len(vals) != 2 {
		return 0, "", fmt.Errorf("simbaredis: %s: %d replies, want 2", op, len(vals))
	}
	if s, ok := vals[0].(string); ok {
		token, err = strconv.ParseUint(s, 10, 64)
		if err != nil || strconv.FormatUint(token, 10) != s {
			return 0, "", fmt.Errorf("simbaredis: %s: key does not hold a token: %q", op, s)
		}
	}
	value, _ = vals[1].(string)
	return token, value, nil
}
