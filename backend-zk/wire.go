package simbazk

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
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
//     (which would renew it too), and a dead server is still noticed.

const (
	pingXid = -2 // xid of the client's ping requests
	// connectHeader is how much of the connect response we read: length,
	// protocol version, timeout (ms), session id.
	connectHeader = 4 + 4 + 4 + 8
	replyHeader   = 4 + 4 // length, xid
)

// sessionConn is one connection of a session; see the comment above.
type sessionConn struct {
	net.Conn
	s *session

	// Write side: the library writes every packet with one Write call.
	wroteConnect bool

	// Read side: one goroutine at a time (connect, then the receive loop).
	handshake atomic.Bool // true until the connect response was read
	head      [connectHeader]byte
	headN     int
	left      int // bytes of the current frame still to pass over

	mu          sync.Mutex // guards outstanding and the read deadline
	outstanding int        // requests written and not yet answered
}

func (c *sessionConn) Write(p []byte) (int, error) {
	if !c.wroteConnect {
		c.wroteConnect = true
		return c.Conn.Write(p)
	}
	if len(p) >= replyHeader {
		if int32(binary.BigEndian.Uint32(p[4:8])) == pingXid {
			return len(p), nil
		}
		c.s.requests.Add(1)
		c.mu.Lock()
		c.outstanding++
		if c.outstanding == 1 {
			_ = c.Conn.SetReadDeadline(time.Now().Add(c.s.responseTimeout()))
		}
		c.mu.Unlock()
	}
	return c.Conn.Write(p)
}

func (c *sessionConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.scan(p[:n])
	if err != nil {
		c.s.lost()
	}
	return n, err
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
		if c.handshake.Load() {
			timeout := time.Duration(int32(binary.BigEndian.Uint32(c.head[8:12]))) * time.Millisecond
			id := int64(binary.BigEndian.Uint64(c.head[12:20]))
			c.handshake.Store(false)
			c.s.connected(id, timeout)
			continue
		}
		if int32(binary.BigEndian.Uint32(c.head[4:8])) >= 0 { // a reply, not an event
			c.answered()
		}
	}
}

// answered re-arms the read deadline after a reply: cleared when nothing
// is pending, one response timeout from now otherwise.
func (c *sessionConn) answered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outstanding > 0 {
		c.outstanding--
	}
	if c.outstanding == 0 {
		_ = c.Conn.SetReadDeadline(time.Time{})
	} else {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.s.responseTimeout()))
	}
}

// SetReadDeadline is honoured while connecting only; afterwards the
// deadline follows the pending requests (see answered).
func (c *sessionConn) SetReadDeadline(t time.Time) error {
	if c.handshake.Load() {
		return c.Conn.SetReadDeadline(t)
	}
	return nil
}

// SetDeadline sets the write deadline, and the read deadline while
// connecting.
func (c *sessionConn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// dialRaw opens one connection to address: the Dialer option or TCP, then
// TLS when configured, all within DialTimeout.
func (b *Backend) dialRaw(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.DialTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if b.opts.Dialer != nil {
		conn, err = b.opts.Dialer(ctx, network, address)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, network, address)
	}
	if err != nil || b.opts.TLS == nil {
		return conn, err
	}
	cfg := b.opts.TLS
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		if host, _, splitErr := net.SplitHostPort(address); splitErr == nil {
			cfg.ServerName = host
		} else {
			cfg.ServerName = address
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tc, nil
}
