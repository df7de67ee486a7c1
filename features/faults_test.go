package features

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"strconv"
	"sync"
	"time"

	simba "github.com/simba-go/simba/core"
)

// Faults made by the server itself, beside the nodes: a session ended as if
// it had expired, a lease freed under its owner. The memory backend has
// controls for both; on a real server the suite reaches the server
// directly, the way an operator, a failover or a clock jump would.

// expireSession ends session id on the server now, as its expiry would:
// the session and what it owns are gone, and its next keep-alive is told
// so.
func (e *backendEnv) expireSession(ctx context.Context, id simba.SessionID) error {
	switch {
	case e.redis != nil:
		n, err := e.redis.Del(ctx, e.prefix+"session:"+string(id), e.prefix+"joined:"+string(id)).Result()
		if err == nil && n == 0 {
			err = errNoSession
		}
		return err
	case e.db != nil:
		q := "UPDATE " + e.prefix + "session SET expires_at = now() - interval '1 second' WHERE id = $1 AND expires_at > now()"
		if e.dialect == dialectMySQL {
			q = "UPDATE " + e.prefix + "session SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ? AND expires_at > UTC_TIMESTAMP(6)"
		}
		res, err := e.db.ExecContext(ctx, q, string(id))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(errNoSession, err)
		}
		return nil
	case e.zk != nil:
		return zkSessions.end(ctx, e.servers[0], id)
	}
	return fmt.Errorf("features: the %s backend cannot expire a session from the server", e.name)
}

// freeLease deletes the owner of lease on the server, without telling the
// session that owned it.
func (e *backendEnv) freeLease(ctx context.Context, lease string) error {
	switch {
	case e.redis != nil:
		return e.redis.HDel(ctx, e.prefix+"lease:"+lease, "session").Err()
	case e.db != nil:
		q := "UPDATE " + e.prefix + "lease SET session_id = NULL WHERE name = $1"
		if e.dialect == dialectMySQL {
			q = "UPDATE " + e.prefix + "lease SET session_id = NULL WHERE name = ?"
		}
		_, err := e.db.ExecContext(ctx, q, lease)
		return err
	case e.zk != nil:
		return e.zk.Delete(path.Join(e.prefix, "leases", lease), -1)
	}
	return fmt.Errorf("features: the %s backend cannot free a lease from the server", e.name)
}

var errNoSession = errors.New("the server has no live session of that id")

// zkCredentials keeps the id and password of every Zookeeper session the
// nodes' proxies saw the server hand out. With both, a second connection
// can take a session over and close it: the server then ends it exactly as
// it ends an expired one, and the node's connection is told it expired.
type zkCredentials struct {
	mu     sync.Mutex
	passwd map[int64][]byte
}

var zkSessions = &zkCredentials{passwd: make(map[int64][]byte)}

// note reads a ConnectResponse: protocol version (int32), timeout (int32),
// session id (int64), password (int32 length, bytes).
func (z *zkCredentials) note(frame []byte) {
	if len(frame) < 20 {
		return
	}
	id := int64(binary.BigEndian.Uint64(frame[8:16]))
	size := int(binary.BigEndian.Uint32(frame[16:20]))
	if id == 0 || size <= 0 || len(frame) < 20+size {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.passwd[id] = bytes.Clone(frame[20 : 20+size])
}

// end connects to server as session id and closes the session.
func (z *zkCredentials) end(ctx context.Context, server string, id simba.SessionID) error {
	zid, err := strconv.ParseUint(string(id), 16, 64)
	if err != nil {
		return fmt.Errorf("features: %q is not a Zookeeper session id: %w", id, err)
	}
	z.mu.Lock()
	passwd := z.passwd[int64(zid)]
	z.mu.Unlock()
	if passwd == nil {
		return fmt.Errorf("features: the proxies never saw session %s open", id)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	// ConnectRequest: protocol version, last zxid seen, timeout (ms),
	// session id, password, read-only.
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 10000)
	req = binary.BigEndian.AppendUint64(req, zid)
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	req = append(req, 0)
	resp, err := zkRoundTrip(conn, req)
	if err != nil {
		return err
	}
	if len(resp) < 16 || binary.BigEndian.Uint32(resp[4:8]) == 0 {
		return errNoSession // a zero timeout: the session had already ended
	}
	// CloseSession: xid 1, op -11, no body; the reply header is xid (int32),
	// zxid (int64), error (int32).
	closeOp := uint32(0xfffffff5) // -11
	resp, err = zkRoundTrip(conn, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 1), closeOp))
	if err != nil {
		return err
	}
	if len(resp) < 16 || binary.BigEndian.Uint32(resp[12:16]) != 0 {
		return fmt.Errorf("features: Zookeeper refused to close session %s", id)
	}
	return nil
}

// zkRoundTrip sends one length-prefixed frame and reads the reply's.
func zkRoundTrip(conn net.Conn, body []byte) ([]byte, error) {
	if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 4<<10 {
		return nil, fmt.Errorf("features: a Zookeeper reply of %d bytes", n)
	}
	resp := make([]byte, n)
	_, err := io.ReadFull(conn, resp)
	return resp, err
}
