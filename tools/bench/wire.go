package main

import (
	"context"
	"database/sql/driver"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// wire counts the requests a client sends and, while recording, keeps the
// statements with their arguments. The hooks below feed it from a go-redis
// client, a pgx pool and a database/sql connector.
type wire struct {
	n         atomic.Int64
	recording atomic.Bool
	mu        sync.Mutex
	got       []statement
}

// statement is one SQL statement as a client sent it.
type statement struct {
	sql  string
	args []any
}

func (w *wire) sent(sqlText string, args []any) {
	w.n.Add(1)
	if !w.recording.Load() {
		return
	}
	w.mu.Lock()
	w.got = append(w.got, statement{sqlText, append([]any(nil), args...)})
	w.mu.Unlock()
}

// count is a counter of the requests sent.
func (w *wire) count(context.Context) (int64, error) { return w.n.Load(), nil }

// wireSet counts the requests of many clients, each with a wire of its own.
type wireSet struct {
	mu    sync.Mutex
	wires []*wire
}

func (ws *wireSet) add() *wire {
	w := &wire{}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.wires = append(ws.wires, w)
	return w
}

// count is a counter of the requests every wire of the set sent.
func (ws *wireSet) count(context.Context) (int64, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var n int64
	for _, w := range ws.wires {
		n += w.n.Load()
	}
	return n, nil
}

// record starts keeping statements; the returned function stops and
// returns those kept since.
func (w *wire) record() (stop func() []statement) {
	w.mu.Lock()
	w.got = nil
	w.mu.Unlock()
	w.recording.Store(true)
	return func() []statement {
		w.recording.Store(false)
		w.mu.Lock()
		defer w.mu.Unlock()
		got := w.got
		w.got = nil
		return got
	}
}

// redisHook counts every command a go-redis client sends (a pipeline
// counts its commands).
type redisHook struct{ w *wire }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.w.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.w.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// pgTracer counts (and records) every Query, QueryRow and Exec of a pgx
// pool, and every statement of a batch (Simba's backend sends a statement
// that may wait for a lock in a batch after the set_config of its
// lock_timeout: two statements, one round trip).
type pgTracer struct{ w *wire }

func (t pgTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.w.sent(d.SQL, d.Args)
	return ctx
}

func (t pgTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t pgTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (t pgTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.w.sent(d.SQL, d.Args)
}

func (t pgTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countingConnector wraps a database/sql connector so that every prepare
// and every execution of a statement is counted, and executions of
// prepared statements are recorded with their SQL text.
type countingConnector struct {
	driver.Connector
	w *wire
}

func (k countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := k.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, w: k.w}, nil
}

// countingConn forwards every optional interface database/sql looks for
// that the MySQL driver's connection implements.
type countingConn struct {
	driver.Conn
	w *wire
}

func namedValues(nv []driver.NamedValue) []any {
	out := make([]any, len(nv))
	for i, v := range nv {
		out[i] = v.Value
	}
	return out
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.w.n.Add(1)
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, sql: query, w: c.w}, nil
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return sentUnlessSkipped(c.w, query, args, func() (driver.Result, error) { return e.ExecContext(ctx, query, args) })
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return sentUnlessSkipped(c.w, query, args, func() (driver.Rows, error) { return q.QueryContext(ctx, query, args) })
}

// sentUnlessSkipped runs call, a direct exec or query of the driver, and
// counts query as sent unless call returns driver.ErrSkip: database/sql
// then prepares the query instead, and the statement counts it.
func sentUnlessSkipped[R any](w *wire, query string, args []driver.NamedValue, call func() (R, error)) (R, error) {
	r, err := call()
	if err != driver.ErrSkip { //nolint:errorlint // the sentinel is returned as is by contract
		w.sent(query, namedValues(args))
	}
	return r, err
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *countingConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *countingConn) IsValid() bool {
	v, ok := c.Conn.(driver.Validator)
	return !ok || v.IsValid()
}

func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if k, ok := c.Conn.(driver.NamedValueChecker); ok {
		return k.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// countingStmt counts and records the executions of a prepared statement.
type countingStmt struct {
	driver.Stmt
	sql string
	w   *wire
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.w.sent(s.sql, namedValues(args))
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.w.sent(s.sql, namedValues(args))
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// Compile-time checks of the interfaces database/sql discovers.
var (
	_ driver.ConnPrepareContext = (*countingConn)(nil)
	_ driver.ExecerContext      = (*countingConn)(nil)
	_ driver.QueryerContext     = (*countingConn)(nil)
	_ driver.ConnBeginTx        = (*countingConn)(nil)
	_ driver.Pinger             = (*countingConn)(nil)
	_ driver.SessionResetter    = (*countingConn)(nil)
	_ driver.Validator          = (*countingConn)(nil)
	_ driver.NamedValueChecker  = (*countingConn)(nil)
	_ driver.StmtExecContext    = (*countingStmt)(nil)
	_ driver.StmtQueryContext   = (*countingStmt)(nil)
	_ redis.Hook                = redisHook{}
	_ pgx.QueryTracer           = pgTracer{}
	_ pgx.BatchTracer           = pgTracer{}
)
