package simbamysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/core/backendkit"
)

// ErrNoWritableHost is matched by the error of a connection to a
// multi-host URL when no host could be reached and was writable: each was
// down, refused the login, or had @@read_only on.
var ErrNoWritableHost = errors.New("simbamysql: no writable host")

// splitHosts reads the host list of a mysql:// URL with several hosts,
// mysql://user:pass@h1:p1,h2:p2/db. It returns the URL with the first
// host alone, for the usual translation, and every host:port in order (a
// host without a port gets 3306). A URL with one host, or a DSN, is
// returned as it is with no hosts. Its errors quote nothing of the URL:
// hosts are named by their position.
func splitHosts(dataSource string) (string, []string, error) {
	if !hasScheme.MatchString(dataSource) {
		return dataSource, nil, nil
	}
	scheme, rest, _ := strings.Cut(dataSource, "://")
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	list := rest[at+1 : end]
	if !strings.Contains(list, ",") {
		return dataSource, nil, nil
	}
	parts := strings.Split(list, ",")
	addrs := make([]string, 0, len(parts))
	seen := make(map[string]int, len(parts))
	for i, p := range parts {
		addr, reason := hostAddr(p)
		if reason != "" {
			return "", nil, pkg.OptionsError("url", fmt.Sprintf("host %d of %d: %s", i+1, len(parts), reason))
		}
		key := strings.ToLower(addr)
		if j, dup := seen[key]; dup {
			return "", nil, pkg.OptionsError("url", fmt.Sprintf("host %d of %d is host %d again", i+1, len(parts), j+1))
		}
		seen[key] = i
		addrs = append(addrs, addr)
	}
	return scheme + "://" + rest[:at+1] + parts[0] + rest[end:], addrs, nil
}

// hostAddr checks one host[:port] of a host list and returns it as
// host:port, or why it cannot be used.
func hostAddr(p string) (addr, reason string) {
	host, port := p, "3306"
	if strings.HasPrefix(p, "[") {
		closing := strings.IndexByte(p, ']')
		if closing < 0 {
			return "", "an IPv6 address without its ']'"
		}
		host = p[1:closing]
		switch after := p[closing+1:]; {
		case after == "":
		case strings.HasPrefix(after, ":"):
			port = after[1:]
		default:
			return "", "text after the IPv6 address"
		}
		if net.ParseIP(host) == nil || !strings.Contains(host, ":") {
			return "", "not an IPv6 address between '[' and ']'"
		}
	} else {
		if h, pt, ok := strings.Cut(p, ":"); ok {
			host, port = h, pt
		}
		switch {
		case host == "":
			return "", "empty host"
		case strings.ContainsAny(host, "[]%/\\ \t"):
			return "", "an invalid character in the host"
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return "", "the port is not a number from 1 to 65535"
	}
	return net.JoinHostPort(host, port), ""
}

// readOnlyCheck asks a new connection to a host of a multi-host URL
// whether the server is read-only (@@read_only not 0). Tests replace it
// to make a host look read-only.
var readOnlyCheck = readOnly

// hostsConnector connects to the first host of its list that answers and
// is writable, asking each new connection, so that after a replica was
// promoted the next connection goes to it without a restart.
type hostsConnector struct {
	addrs   []string
	conns   []driver.Connector
	secrets []string
	log     *slog.Logger
	last    atomic.Int64 // index of the last host connected to, -1 at first
	// gen counts the demotions seen: a connection made before the last
	// one is stale (hostConn).
	gen atomic.Int64
}

// newHostsConnector makes a connector per host from cfg, which names the
// first host: each gets its own address (and TLS server name, from the
// tls parameter, unless Options.TLS set one).
func newHostsConnector(cfg *mysql.Config, addrs, secrets []string, log *slog.Logger) (*hostsConnector, error) {
	h := &hostsConnector{addrs: addrs, secrets: secrets, log: log}
	h.last.Store(-1)
	for _, addr := range addrs {
		c := cfg.Clone()
		c.Addr = addr
		conn, err := mysql.NewConnector(c)
		if err != nil {
			return nil, err
		}
		h.conns = append(h.conns, conn)
	}
	return h, nil
}

var _ driver.Connector = (*hostsConnector)(nil)

func (h *hostsConnector) Driver() driver.Driver { return mysql.MySQLDriver{} }

// Connect tries the hosts in order and returns a connection to the first
// that is writable. Failing that, its error names each host with its
// problem (the driver's messages masked of the passwords), matches
// ErrNoWritableHost, and wraps ctx's error when ctx ended.
func (h *hostsConnector) Connect(ctx context.Context) (driver.Conn, error) {
	problems := make([]string, 0, len(h.addrs))
	for i, c := range h.conns {
		if ctx.Err() != nil {
			break
		}
		conn, ro, err := h.try(ctx, c, h.addrs[i])
		switch {
		case err != nil:
			problems = append(problems, h.addrs[i]+": "+backendkit.MaskText(err.Error(), h.secrets))
			continue
		case ro:
			problems = append(problems, h.addrs[i]+": read-only")
			continue
		}
		if prev := h.last.Swap(int64(i)); prev != int64(i) && h.log != nil {
			h.log.Info(pkg.Name+": connected to the writable host", "host", h.addrs[i],
				"position", i+1, "hosts", len(h.addrs))
		}
		return h.wrap(conn), nil
	}
	// No package prefix: Open's error and the calls' add theirs.
	msg := fmt.Sprintf("no writable host among %d hosts (%s)", len(h.addrs), strings.Join(problems, "; "))
	if err := ctx.Err(); err != nil {
		return nil, &hostsError{msg: msg + ": " + err.Error(), err: err}
	}
	return nil, &hostsError{msg: msg}
}

// try connects through c and asks whether the server is read-only; a
// read-only connection is closed.
func (h *hostsConnector) try(ctx context.Context, c driver.Connector, addr string) (driver.Conn, bool, error) {
	conn, err := c.Connect(ctx)
	if err != nil {
		return nil, false, err
	}
	ro, err := readOnlyCheck(ctx, conn, addr)
	if err != nil || ro {
		_ = conn.Close()
		return nil, ro, err
	}
	return conn, false, nil
}

func readOnly(ctx context.Context, conn driver.Conn, _ string) (bool, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return false, errors.New("the driver's connection cannot run a query")
	}
	rows, err := q.QueryContext(ctx, "SELECT @@read_only", nil)
	if err != nil {
		return false, fmt.Errorf("read_only check: %w", err)
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return false, fmt.Errorf("read_only check: %w", err)
	}
	switch x := v[0].(type) {
	case int64:
		return x != 0, nil
	case []byte:
		return string(x) != "0", nil
	}
	return false, fmt.Errorf("read_only check: unexpected %T", v[0])
}

// hostsError is a failed connection to a multi-host URL.
type hostsError struct {
	msg string
	err error // ctx's error, when ctx ended
}

func (e *hostsError) Error() string { return e.msg }

func (e *hostsError) Is(target error) bool { return target == ErrNoWritableHost }

func (e *hostsError) Unwrap() error { return e.err }

// erReadOnly is the server error of a write on a read-only server
// (ER_OPTION_PREVENTS_STATEMENT, "running with the --read-only option").
const erReadOnly = 1290

// demotedError reports whether err says the server is read-only.
func demotedError(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == erReadOnly
}

// hostConn is a connection of a multi-host URL. When one of its statements
// finds the server read-only (a primary demoted while it stayed up), every
// connection made until then is dropped as it goes back to the pool or is
// taken from it, so that the next ones go through Connect and find the
// new primary.
type hostConn struct {
	c   mysqlConn
	h   *hostsConnector
	gen int64 // h.gen when connected
}

// mysqlConn is every interface go-sql-driver's connection implements that
// database/sql uses.
type mysqlConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// mysqlStmt is every interface go-sql-driver's statement implements that
// database/sql uses (its ColumnConverter only without a NamedValueChecker).
type mysqlStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
	driver.NamedValueChecker
}

var (
	_ mysqlConn = (*hostConn)(nil)
	_ mysqlStmt = (*hostStmt)(nil)
)

// wrap returns conn as a hostConn, or conn itself when go-sql-driver's
// connection lacks an interface (a later version): it then works without
// the drop on demotion.
func (h *hostsConnector) wrap(conn driver.Conn) driver.Conn {
	c, ok := conn.(mysqlConn)
	if !ok {
		return conn
	}
	return &hostConn{c: c, h: h, gen: h.gen.Load()}
}

// check notes a read-only error: every connection of this generation is
// then stale.
func (c *hostConn) check(err error) error {
	if err != nil && demotedError(err) {
		c.h.gen.CompareAndSwap(c.gen, c.gen+1)
	}
	return err
}

func (c *hostConn) stale() bool { return c.h.gen.Load() != c.gen }

func (c *hostConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *hostConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.check(err)
	}
	ms, ok := s.(mysqlStmt)
	if !ok {
		return s, nil
	}
	return &hostStmt{s: ms, c: c}, nil
}

func (c *hostConn) Close() error { return c.c.Close() }

func (c *hostConn) Begin() (driver.Tx, error) { return c.c.Begin() }

func (c *hostConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.c.BeginTx(ctx, opts)
	return tx, c.check(err)
}

func (c *hostConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.c.ExecContext(ctx, query, args)
	return r, c.check(err)
}

func (c *hostConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.c.QueryContext(ctx, query, args)
	return r, c.check(err)
}

func (c *hostConn) Ping(ctx context.Context) error { return c.c.Ping(ctx) }

// ResetSession refuses a stale connection when database/sql takes it from
// the pool: it then opens another.
func (c *hostConn) ResetSession(ctx context.Context) error {
	if c.stale() {
		return driver.ErrBadConn
	}
	return c.c.ResetSession(ctx)
}

// IsValid drops a stale connection when it goes back to the pool.
func (c *hostConn) IsValid() bool { return !c.stale() && c.c.IsValid() }

func (c *hostConn) CheckNamedValue(nv *driver.NamedValue) error { return c.c.CheckNamedValue(nv) }

// hostStmt is a prepared statement of a hostConn.
type hostStmt struct {
	s mysqlStmt
	c *hostConn
}

func (s *hostStmt) Close() error  { return s.s.Close() }
func (s *hostStmt) NumInput() int { return s.s.NumInput() }

func (s *hostStmt) Exec(args []driver.Value) (driver.Result, error) {
	r, err := s.s.Exec(args)
	return r, s.c.check(err)
}

func (s *hostStmt) Query(args []driver.Value) (driver.Rows, error) {
	r, err := s.s.Query(args)
	return r, s.c.check(err)
}

func (s *hostStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.s.ExecContext(ctx, args)
	return r, s.c.check(err)
}

func (s *hostStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.s.QueryContext(ctx, args)
	return r, s.c.check(err)
}

func (s *hostStmt) CheckNamedValue(nv *driver.NamedValue) error { return s.s.CheckNamedValue(nv) }
