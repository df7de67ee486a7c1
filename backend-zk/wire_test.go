package simbazk

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// recordConn is a net.Conn that records writes and read deadlines.
type recordConn struct {
	net.Conn
	written  bytes.Buffer
	deadline time.Time
}

func (c *recordConn) Write(p []byte) (int, error)       { return c.written.Write(p) }
func (c *recordConn) SetReadDeadline(t time.Time) error { c.deadline = t; return nil }

func newWireSession() *session {
	return &session{
		b:     &Backend{log: quiet()},
		ready: make(chan struct{}),
		dead:  make(chan struct{}),
		next:  make(chan struct{}),
	}
}

// packet returns body with its length before it, as on the wire.
func packet(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestWireScanInAnyChunks(t *testing.T) {
	connect := binary.BigEndian.AppendUint32(nil, 0)          // protocol version
	connect = binary.BigEndian.AppendUint32(connect, 4000)    // timeout ms
	connect = binary.BigEndian.AppendUint64(connect, 0x1234)  // session id
	connect = binary.BigEndian.AppendUint32(connect, 16)      // password length
	connect = append(append(connect, make([]byte, 16)...), 0) // password, read-only flag
	stream := packet(connect)
	const replies = 5
	for i := range replies {
		body := binary.BigEndian.AppendUint32(nil, uint32(i+1)) // xid
		body = append(body, make([]byte, 12+rand.IntN(40))...)  // zxid, err, payload
		stream = append(stream, packet(body)...)
		event := binary.BigEndian.AppendUint32(nil, 0xffffffff) // xid -1: a watch event
		event = append(event, make([]byte, 30)...)
		stream = append(stream, packet(event)...)
	}
	for try := range 200 {
		s := newWireSession()
		c := &sessionConn{Conn: &recordConn{}, s: s, outstanding: replies}
		c.handshake.Store(true)
		for rest := stream; len(rest) > 0; {
			n := min(len(rest), 1+rand.IntN(9))
			c.scan(rest[:n])
			rest = rest[n:]
		}
		if s.zid.Load() != 0x1234 || time.Duration(s.timeout.Load()) != 4*time.Second {
			t.Fatalf("try %d: session %x timeout %v, want 1234 and 4s", try, s.zid.Load(), time.Duration(s.timeout.Load()))
		}
		if c.outstanding != 0 || c.headN != 0 || c.left != 0 {
			t.Fatalf("try %d: outstanding %d, head %d, left %d after the stream; want all 0", try, c.outstanding, c.headN, c.left)
		}
	}
}

func TestWireDropsPingsAndArmsDeadline(t *testing.T) {
	s := newWireSession()
	s.timeout.Store(int64(3 * time.Second))
	rc := &recordConn{}
	c := &sessionConn{Conn: rc, s: s}
	connectReq := packet(make([]byte, 40))
	ping := packet(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0xfffffffe), 11)) // xid -2, opPing
	req := packet(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 7), 3))            // xid 7, exists
	for _, p := range [][]byte{connectReq, ping, req} {
		if n, err := c.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if want := append(append([]byte{}, connectReq...), req...); !bytes.Equal(rc.written.Bytes(), want) {
		t.Fatalf("wrote %d bytes, want the connect request and the request only (%d bytes)", rc.written.Len(), len(want))
	}
	if s.requests.Load() != 1 || c.outstanding != 1 {
		t.Fatalf("requests %d outstanding %d, want 1 and 1", s.requests.Load(), c.outstanding)
	}
	if d := time.Until(rc.deadline); d <= time.Second || d > 2*time.Second {
		t.Fatalf("read deadline in %v, want 2/3 of the 3s session timeout", d)
	}
	c.answered()
	if !rc.deadline.IsZero() {
		t.Fatalf("read deadline %v with nothing pending, want none", rc.deadline)
	}
	_ = c.SetReadDeadline(time.Now()) // the client's idle deadline is ignored
	if !rc.deadline.IsZero() {
		t.Fatal("the client's read deadline was applied after the handshake")
	}
}

func TestWireHandshakeDeadlineEndsWithIt(t *testing.T) {
	s := newWireSession()
	s.timeout.Store(int64(3 * time.Second))
	rc := &recordConn{}
	c := &sessionConn{Conn: rc, s: s}
	c.handshake.Store(true)
	_ = c.SetReadDeadline(time.Time{}) // the client, between the length and the rest of the connect response
	if rc.deadline.IsZero() {
		t.Fatal("no read deadline while connecting, want one response timeout")
	}
	connect := binary.BigEndian.AppendUint32(nil, 0)         // protocol version
	connect = binary.BigEndian.AppendUint32(connect, 3000)   // timeout ms
	connect = binary.BigEndian.AppendUint64(connect, 0x1234) // session id
	connect = binary.BigEndian.AppendUint32(connect, 16)     // password length
	c.scan(packet(append(connect, make([]byte, 16)...)))
	if !rc.deadline.IsZero() {
		t.Fatalf("read deadline %v after the connect response with nothing pending, want none: an idle connection would end and its reconnect renew the session", rc.deadline)
	}
}
