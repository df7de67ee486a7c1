package simbaredis

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// coalescer sends the acquire and release scripts that goroutines of one
// Backend issue at the same time in one pipeline: one round trip and one
// read and write on each side for the whole batch. Each script still runs
// atomically on its own, so every name's step stays one atomic step. A call
// alone runs at once on the caller's goroutine, with no added latency.
type coalescer struct {
	client redis.UniversalClient

	mu      sync.Mutex
	pending []*scriptCall
	busy    bool // a goroutine is sending a batch
}

type scriptCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	val    any
	err    error
	done   chan struct{}
}

// run runs script through the coalescer and returns its reply, or ctx's
// error when ctx ends first (the script may still run on the server, like
// a call whose reply was lost).
func (q *coalescer) run(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	c := &scriptCall{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, c)
	lead := !q.busy
	q.busy = true
	q.mu.Unlock()
	if lead {
		q.sendOne()
	}
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sendOne sends the pending calls as one batch. Calls that arrived
// meanwhile are sent by a goroutine of their own, so that the leader's
// latency does not grow with the load.
func (q *coalescer) sendOne() {
	if q.sendBatch() {
		go func() {
			for q.sendBatch() {
			}
		}()
	}
}

// sendBatch sends what is pending and reports whether more arrived.
func (q *coalescer) sendBatch() bool {
	q.mu.Lock()
	batch := q.pending
	q.pending = nil
	if len(batch) == 0 {
		q.busy = false
		q.mu.Unlock()
		return false
	}
	q.mu.Unlock()

	if len(batch) == 1 {
		c := batch[0]
		c.val, c.err = c.script.Run(c.ctx, q.client, c.keys, c.args...).Result()
		close(c.done)
	} else {
		q.pipeline(batch)
	}

	q.mu.Lock()
	more := len(q.pending) > 0
	if !more {
		q.busy = false
	}
	q.mu.Unlock()
	return more
}

// pipeline sends a batch as EVALSHA commands in one pipeline, bounded by
// the latest deadline of its calls; a script the server does not know yet
// is sent again on its own (EVAL).
func (q *coalescer) pipeline(batch []*scriptCall) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	pipe := q.client.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // the errors are read per command below
	for i, c := range batch {
		c.val, c.err = cmds[i].Result()
		if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") && c.ctx.Err() == nil {
			c.val, c.err = c.script.Run(c.ctx, q.client, c.keys, c.args...).Result()
		}
		close(c.done)
	}
}

// batchContext ends at the latest deadline of the batch's calls, and not
// when one of them is cancelled: the others still want their replies.
func batchContext(batch []*scriptCall) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.WithoutCancel(c.ctx))
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
}
