package simbaredis

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// coalescer sends the acquire and release scripts that goroutines of one
// Backend issue at the same time in one pipeline: one round trip and one
// read and write on each side for the whole batch. Each script still runs
// atomically on its own, so every name's step stays one atomic step. A call
// alone runs at once on the caller's goroutine, with no added latency; a
// batch of several goes from a goroutine of its own, so that every caller
// waits for its reply only as long as its own context allows.
type coalescer struct {
	client redis.UniversalClient

	// replicas and replicaTimeout are Options.MinReplicas and
	// ReplicaTimeout: a batch holding a call that asks for it ends with
	// WAIT replicas replicaTimeout, sent on the connection of its writes.
	replicas       int
	replicaTimeout time.Duration

	mu      sync.Mutex
	pending []*scriptCall
	busy    bool // a goroutine is sending a batch
}

type scriptCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	wait   bool // send WAIT after it (when the coalescer has replicas)
	val    any
	err    error
	acked  acks // of a call with wait
	done   chan struct{}
}

// acks is the outcome of a WAIT: the replicas that acknowledged the
// writes sent before it, or the error that kept it from answering.
type acks struct {
	n   int64
	err error
}

// run runs script through the coalescer and returns its reply, or ctx's
// error when ctx ends first (the script may still run on the server, like
// a call whose reply was lost). With wait, when the coalescer has
// replicas, WAIT follows in the same round trip, and acks is its outcome.
func (q *coalescer) run(ctx context.Context, wait bool, script *redis.Script, keys []string, args ...any) (any, acks, error) {
	c := &scriptCall{ctx: ctx, script: script, keys: keys, args: args, wait: wait && q.replicas > 0, done: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, c)
	var batch []*scriptCall
	if !q.busy {
		// Nothing in flight: this call leads, with what is pending.
		q.busy = true
		batch, q.pending = q.pending, nil
	}
	q.mu.Unlock()
	switch {
	case len(batch) == 1:
		// Alone: sent at once on the caller's goroutine, bounded by its
		// own ctx. Calls that arrived meanwhile are sent by a goroutine
		// of their own, so that the leader's latency does not grow with
		// the load.
		q.flush(batch)
		if q.more() {
			go q.drain()
		}
	case len(batch) > 1:
		// With other calls: sent by a goroutine of its own, bounded by
		// the latest of their deadlines, while this caller waits below
		// for its own ctx only.
		go func() {
			q.flush(batch)
			q.drain()
		}()
	}
	select {
	case <-c.done:
		return c.val, c.acked, c.err
	case <-ctx.Done():
		return nil, acks{err: ctx.Err()}, ctx.Err()
	}
}

// replicated returns nil when Options.MinReplicas is off or the WAIT of a
// call saw enough replicas acknowledge it, and otherwise the error that
// says why not, matching ErrNotReplicated.
func (q *coalescer) replicated(op string, a acks) error {
	if q.replicas == 0 || (a.err == nil && a.n >= int64(q.replicas)) {
		return nil
	}
	return &replicaError{op: op, acked: a.n, want: q.replicas, timeout: q.replicaTimeout, err: a.err}
}

// waited runs one call at once, outside any batch (a keep-alive, which
// the coalescer does not batch), followed by WAIT in the same round trip
// when the coalescer has replicas.
func (q *coalescer) waited(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, acks, error) {
	if q.replicas == 0 {
		val, err := script.Run(ctx, q.client, keys, args...).Result()
		return val, acks{}, err
	}
	c := &scriptCall{ctx: ctx, script: script, keys: keys, args: args, wait: true, done: make(chan struct{})}
	q.pipeline([]*scriptCall{c})
	return c.val, c.acked, c.err
}

// drain sends the pending calls, batch after batch, until none is left.
func (q *coalescer) drain() {
	for q.sendBatch() {
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
	q.flush(batch)
	return q.more()
}

// more reports whether calls are pending, and otherwise ends the busy
// spell of the goroutine that sent the last batch.
func (q *coalescer) more() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	more := len(q.pending) > 0
	if !more {
		q.busy = false
	}
	return more
}

// flush sends batch: one call without WAIT as a plain EVALSHA under its
// own ctx, anything else as a pipeline.
func (q *coalescer) flush(batch []*scriptCall) {
	if len(batch) == 1 && !batch[0].wait {
		c := batch[0]
		c.val, c.err = c.script.Run(c.ctx, q.client, c.keys, c.args...).Result()
		close(c.done)
		return
	}
	q.pipeline(batch)
}

// pipeline sends a batch as EVALSHA commands in one pipeline, bounded by
// the latest deadline of its calls, and ends it with WAIT when a call of
// the batch asks for it. A script the server does not know yet is sent
// again, with EVAL: on its own, or followed by WAIT again when its call
// asked for it, since the first WAIT came before its write.
func (q *coalescer) pipeline(batch []*scriptCall) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	q.send(ctx, batch, false)
	var again []*scriptCall
	for _, c := range batch {
		if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") && c.ctx.Err() == nil {
			if c.wait {
				again = append(again, c)
				continue
			}
			c.val, c.err = c.script.Run(c.ctx, q.client, c.keys, c.args...).Result()
		}
		close(c.done)
	}
	if len(again) > 0 {
		q.send(ctx, again, true)
		for _, c := range again {
			close(c.done)
		}
	}
}

// send runs batch in one pipeline (EVALSHA, or EVAL when eval is set),
// followed by WAIT when one of its calls asks for it, and sets each
// call's reply and, for those that asked, the WAIT's outcome.
func (q *coalescer) send(ctx context.Context, batch []*scriptCall, eval bool) {
	wait := q.replicas > 0 && slices.ContainsFunc(batch, func(c *scriptCall) bool { return c.wait })
	pipe, err := q.pipe(ctx, batch[0].keys[0], wait)
	if err != nil {
		for _, c := range batch {
			c.err, c.acked = err, acks{err: err}
		}
		return
	}
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		if eval {
			cmds[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
		} else {
			cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
	}
	var waitCmd *redis.Cmd
	if wait {
		waitCmd = pipe.Do(ctx, "wait", q.replicas, q.replicaTimeout.Milliseconds())
	}
	_, _ = pipe.Exec(ctx) // the errors are read per command below
	moved := false
	for i, c := range batch {
		c.val, c.err = cmds[i].Result()
		moved = moved || redis.HasErrorPrefix(c.err, "MOVED") || redis.HasErrorPrefix(c.err, "ASK")
		if c.wait && waitCmd != nil {
			c.acked.n, c.acked.err = waitCmd.Int64()
		}
	}
	if cc, ok := q.client.(*redis.ClusterClient); ok && wait && moved {
		cc.ReloadState(ctx) // the slot moved: find its new node next time
	}
}

// pipe returns the pipeline a batch goes out on: the client's, or for a
// batch that ends with WAIT on a Cluster, that of the node serving key.
// Every key of an operation shares the prefix's hash tag, so one node
// holds them all, and WAIT, which names no key, must reach that node on
// the connection of the writes: a cluster pipeline would send it to a
// node of its own choosing.
func (q *coalescer) pipe(ctx context.Context, key string, wait bool) (redis.Pipeliner, error) {
	if cc, ok := q.client.(*redis.ClusterClient); ok && wait {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return node.Pipeline(), nil
	}
	return q.client.Pipeline(), nil
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
