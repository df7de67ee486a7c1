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
		return conn, nil
	}
	msg := fmt.Sprintf("%s among %d hosts (%s)", ErrNoWritableHost, len(h.addrs), strings.Join(problems, "; "))
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
