package simbazk

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The Zookeeper client library gives no access to the negotiated session
// timeout, pings on its own and silently opens a new session after an
// expiry. sessionConn sits between the library and each TCP connection of
// a session to close those three gaps, by reading the frames of the
// protocol (a 4-byte length before every packet):
//
//   - the connect response (timeout, session id) of every connection is
//     reported to the session, which learns its negotiated timeout and
//     notices an expiry (id 0) or a different session;
//   - ping requests (xid -2) are dropped, so only Simba's own calls renew
//     the session;
//   - the library's idle read deadline is replaced by one armed only while
//     a request waits for its answer: an idle session no longer reconnects
//     (which would renew it too), and a dead server is still noticed;
//   - the library waits ten response timeouts for the answer to its connect
//     request (100s for a 15s lease): the wait is cut to one response
//     timeout, after which the library tries the next server.
//
// The connections of the read connection (watchConn) are sessionConns of
// no session: only the last of those four applies to them, with the
// response timeout the library uses for watchTimeout; its pings and read
// deadlines pass, since that connection's session must stay alive on its
// own. Every sessionConn also holds the setWatchesGate of its connection.
//
// The library has no way to interrupt a connection it reads from: Close
// asks the server to end the session and waits up to a second for the
// answer, and a connection whose server never answers would keep its
// goroutines until a read deadline. Every connection of the backend is
// therefore kept in a links set, which closes it after the library's
// Close (see session.closeConn, watchConn.close).

const (
	pingXid = -2 // xid of the client's ping requests
	// connectHeader is how much of the connect response we read: length,
	// protocol version, timeout (ms), session id.
	connectHeader = 4 + 4 + 4 + 8
	replyHeader   = 4 + 4 // length, xid
	// watchConnTimeout is the response timeout of the read connection:
	// what the library uses for a session timeout of watchTimeout.
	watchConnTimeout = watchTimeout * 2 / 3
)

// sessionConn is one connection of a session, or of the read connection
// when s is nil; see the comment above.
type sessionConn struct {
	net.Conn
	s        *session
	watching *atomic.Bool // the library may hold watches on the connection (see setWatchesGate)

	// Write side: the library writes every packet with one Write call.
	wroteConnect bool

	// Read side: one goroutine at a time (connect, then the receive loop).
	handshake atomic.Bool // true until the connect response was read
	head      [connectHeader]byte
	headN     int
	left      int // bytes of the current frame still to pass over

	mu          sync.Mutex // guards outstanding and the read deadline
	outstanding int        // requests written and not yet answered

	gate setWatchesGate
}

func (c *sessionConn) Write(p []byte) (int, error) {
	if !c.wroteConnect {
		c.wroteConnect = true
		return c.Conn.Write(p)
	}
	c.gate.wrote(p)
	if c.s != nil && len(p) >= replyHeader {
		if int32(binary.BigEndian.Uint32(p[4:8])) == pingXid {
			return len(p), nil
		}
		c.s.requests.Add(1)
		c.mu.Lock()
		c.outstanding++
		if c.outstanding == 1 {
			_ = c.Conn.SetReadDeadline(time.Now().Add(c.responseTimeout()))
		}
		c.mu.Unlock()
	}
	return c.Conn.Write(p)
}

func (c *sessionConn) Read(p []byte) (int, error) {
	if !c.handshake.Load() && c.left == 0 { // past the whole connect response
		c.gate.firstRead(c.watching.Load())
	}
	n, err := c.Conn.Read(p)
	c.scan(p[:n])
	if err != nil && c.s != nil {
		c.s.lost()
	}
	return n, err
}

// responseTimeout is how long an answer may take.
func (c *sessionConn) responseTimeout() time.Duration {
	if c.s == nil {
		return watchConnTimeout
	}
	return c.s.responseTimeout()
}

// scan follows the frames in b, the next bytes of the stream.
func (c *sessionConn) scan(b []byte) {
	for len(b) > 0 {
		if c.left > 0 {
			k := min(c.left, len(b))
			c.left -= k
			b = b[k:]
			continue
		}
		need := replyHeader
		if c.handshake.Load() {
			need = connectHeader
		}
		k := copy(c.head[c.headN:need], b)
		c.headN += k
		b = b[k:]
		if c.headN < need {
			return
		}
		c.headN = 0
		c.left = max(0, int(binary.BigEndian.Uint32(c.head[0:4]))-(need-4))
		switch {
		case c.s == nil:
			c.handshake.Store(false)
		case c.handshake.Load():
			timeout := time.Duration(int32(binary.BigEndian.Uint32(c.head[8:12]))) * time.Millisecond
			id := int64(binary.BigEndian.Uint64(c.head[12:20]))
			c.handshake.Store(false)
			c.s.connected(id, timeout)
			// The deadline the connect wait armed must not outlive it: on
			// an idle connection it would end the connection, and the
			// reconnect would renew the session.
			c.rearm(0)
		case int32(binary.BigEndian.Uint32(c.head[4:8])) >= 0: // a reply, not an event
			c.answered()
		}
	}
}

// answered re-arms the read deadline after a reply (see rearm).
func (c *sessionConn) answered() { c.rearm(1) }

// rearm takes the given number of replies off the pending requests and
// re-arms the read deadline: cleared when nothing is pending, one
// response timeout from now otherwise.
func (c *sessionConn) rearm(replies int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.outstanding = max(0, c.outstanding-replies)
	if c.outstanding == 0 {
		_ = c.Conn.SetReadDeadline(time.Time{})
	} else {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.responseTimeout()))
	}
}

// SetReadDeadline is cut to one response timeout from now while
// connecting; afterwards a session's deadline follows its pending
// requests (see answered), and the read connection's passes.
func (c *sessionConn) SetReadDeadline(t time.Time) error {
	switch {
	case c.handshake.Load():
		if limit := time.Now().Add(c.responseTimeout()); t.IsZero() || limit.Before(t) {
			t = limit
		}
	case c.s != nil:
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets the write deadline, and the read deadline as
// SetReadDeadline does.
func (c *sessionConn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// dialLink opens a connection for the library, as dialRaw does, kept in
// l, as a sessionConn of s (nil for the read connection) whose library
// may hold watches once watching is set.
func (b *Backend) dialLink(l *links, s *session, watching *atomic.Bool, network, address string) (net.Conn, error) {
	c, err := b.dialRaw(context.Background(), network, address)
	if err != nil {
		return nil, err
	}
	if !l.add(c) {
		return nil, errLinksClosed
	}
	sc := &sessionConn{Conn: c, s: s, watching: watching, gate: newSetWatchesGate()}
	sc.handshake.Store(true)
	return sc, nil
}

// errLinksClosed is what a dial answers once its connection was closed.
var errLinksClosed = errors.New("simbazk: connection closed")

// links tracks the network connection of one library connection, so that
// it can be closed whatever the server does; once closed it refuses new
// ones.
type links struct {
	mu     sync.Mutex
	closed bool
	cur    net.Conn // the library uses one at a time, closing it before the next
}

// add records c, or closes it and reports false once the links are closed.
func (l *links) add(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return false
	}
	l.cur = c
	return true
}

// close closes the current connection and refuses new ones.
func (l *links) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.cur != nil {
		_ = l.cur.Close()
		l.cur = nil
	}
}

// dialRaw opens one connection to address: the Dialer option or TCP, then
// TLS when configured, all within DialTimeout and ctx.
func (b *Backend) dialRaw(ctx context.Context, network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.DialTimeout)
	defer cancel()
	dial := b.opts.Dialer
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, network, address)
	if err != nil || b.opts.TLS == nil {
		return conn, err
	}
	cfg := b.opts.TLS
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = address
		if host, _, err := net.SplitHostPort(address); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}

// Open's probe speaks the protocol itself: the library has no call that
// connects without keeping a session, and its connect wait cannot be
// bounded by a context.
const (
	// probeTimeout is the session timeout the probe asks for: the server
	// raises it to its minimum (two ticks, 4s by default), which is how
	// long the probe's session outlives it should the close get lost.
	probeTimeout = time.Millisecond
	// maxProbeFrame bounds the frames the probe reads: a connect response
	// is 36 bytes, a close reply 16.
	maxProbeFrame = 1 << 10
	// probePause is the least time between two rounds of probeAny.
	probePause = 50 * time.Millisecond
)

// probe checks that the Zookeeper server at address answers: it connects
// as every connection of the backend does (Dialer, TLS), sends a connect
// request, and closes the session the server created at once, all within
// DialTimeout and ctx. Only a server that stops answering between its
// connect response and the close leaves a session behind, owning no node,
// until the server's minimum session timeout. When ctx ends it, the error
// is ctx's.
func (b *Backend) probe(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.DialTimeout)
	defer cancel()
	conn, err := b.dialRaw(ctx, "tcp", address)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The end of ctx, rather than a deadline of the connection, ends a
	// read or write: its error then tells whether it was the caller's ctx.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_, err = handshake(conn)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case b.opts.TLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		// A secureClientPort closes a connection that does not start
		// with a TLS handshake.
		return fmt.Errorf("%w: the server closed the connection before its connect response (a TLS port needs Options.TLS)", err)
	}
	return err
}

// handshake opens a session on conn and closes it. closed reports whether
// the server confirmed the close; the probe succeeds either way.
func handshake(conn net.Conn) (closed bool, err error) {
	// Connect request: length, protocol version, last zxid seen, timeout
	// (ms), session id (0: a new session), password (16 zero bytes).
	req := make([]byte, 4+4+8+4+8+4+16)
	binary.BigEndian.PutUint32(req[0:], uint32(len(req)-4))
	binary.BigEndian.PutUint32(req[16:], uint32(probeTimeout/time.Millisecond))
	binary.BigEndian.PutUint32(req[28:], 16)
	resp, err := exchange(conn, req)
	switch {
	case err != nil:
		return false, err
	case len(resp) < 16:
		return false, fmt.Errorf("short connect response (%d bytes)", len(resp))
	case binary.BigEndian.Uint64(resp[8:16]) == 0:
		return false, errors.New("the server refused a new session")
	}
	// Close-session request: length 8, xid 1, type -11 (close session).
	// Its reply: xid, zxid, error (0 when closed).
	reply, err := exchange(conn, []byte{0, 0, 0, 8, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xf5})
	return err == nil && len(reply) >= 16 && binary.BigEndian.Uint32(reply[0:4]) == 1 && binary.BigEndian.Uint32(reply[12:16]) == 0, nil
}

// exchange writes req on conn and reads the length-prefixed frame that
// answers it.
func exchange(conn net.Conn, req []byte) ([]byte, error) {
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	var head [4]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > maxProbeFrame {
		return nil, fmt.Errorf("frame of %d bytes, not a Zookeeper server", n)
	}
	buf := make([]byte, n)
	_, err := io.ReadFull(conn, buf)
	return buf, err
}

// probeAny probes the servers in order until one answers. It fails when
// none did, or when ctx ended first; without a deadline in ctx, it takes
// at most DialTimeout per server.
func (b *Backend) probeAny(ctx context.Context) error {
	_, bounded := ctx.Deadline()
	var msgs []string // of the last round that probed a server
	var last error
	for {
		start, silent, round := time.Now(), false, []string(nil)
		for _, server := range b.servers {
			err := b.probe(ctx, server)
			if err == nil {
				return nil
			}
			if ctx.Err() != nil {
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// The server's DialTimeout, not the caller's deadline: say
				// so without letting errors.Is report the caller's ctx as
				// ended.
				err = fmt.Errorf("no answer within %v (DialTimeout)", b.opts.DialTimeout)
				silent = true
			}
			round, last = append(round, server+": "+err.Error()), err
		}
		if len(round) > 0 {
			msgs = round
		}
		// A server that did not answer within DialTimeout may be slow
		// rather than down: while ctx allows, the servers are asked again,
		// so that Open waits for its context rather than DialTimeout.
		if ctx.Err() != nil || !bounded || !silent {
			break
		}
		waitFor(ctx.Done(), probePause-time.Since(start))
	}
	if err := ctx.Err(); err != nil {
		detail := ""
		if len(msgs) > 0 {
			detail = " (" + strings.Join(msgs, "; ") + ")"
		}
		return fmt.Errorf("simbazk: open: no Zookeeper server of %v answered%s: %w", b.servers, detail, err)
	}
	return &probeError{servers: b.servers, msgs: msgs, last: last}
}

// probeError is Open's error when no server answered its probe. The last
// server's error stays reachable with errors.As (a *net.OpError for a
// refused connection).
type probeError struct {
	servers []string
	msgs    []string
	last    error
}

func (e *probeError) Error() string {
	return fmt.Sprintf("simbazk: open: no Zookeeper server of %v answered: %s", e.servers, strings.Join(e.msgs, "; "))
}

func (e *probeError) Unwrap() error { return e.last }
