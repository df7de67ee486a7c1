package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	simbazk "github.com/simba-go/simba/backend-zk"
	simba "github.com/simba-go/simba/core"
)

// Simba's nodes of the run live under zkRoot, the peers' under zkPeers
// (both below the connect string's chroot, if any).
const (
	zkRoot  = "/simbabench"
	zkPeers = "/simbabench-peers"
)

// quietZK drops the Zookeeper client's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// zkSuite compares Simba's lock with go-zookeeper's recipe (zk.NewLock:
// Lock and Unlock) and the floor (create and delete of an ephemeral node),
// Simba's semaphore (no peer, no floor), and the clean handover of each
// lock: a release seen by the waiter's watch.
func zkSuite(ctx context.Context, s *settings, connect string, su *suite) error {
	const backend = "zk"
	servers, chroot, err := simbazk.ParseConnectString(connect)
	if err != nil {
		return fmt.Errorf("SIMBA_TEST_ZK_SERVERS: %w", err)
	}
	newConn := func() (*zk.Conn, error) {
		c, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(quietZK{}))
		if err != nil {
			return nil, err
		}
		su.onClose(func() error { c.Close(); return nil })
		return c, nil
	}
	newBackend := func() (*simbazk.Backend, error) {
		// Open checks, within ctx, that a server answers.
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		b, err := simbazk.Open(octx, connect, simbazk.Options{Root: zkRoot, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			su.onClose(b.Close)
		}
		return b, err
	}
	acl := zk.WorldACL(zk.PermAll)
	peers := chroot + zkPeers

	cases, err := s.implCases(backend, 1, []impl{
		{implSimba, func(ns []string) (opFunc, error) {
			b, err := newBackend()
			if err != nil {
				return nil, err
			}
			return simbaLockOp(su, b, ns)
		}},
		spiImpl(ctx, func() (simba.Backend, error) { return newBackend() }),
		{"zklock", func(ns []string) (opFunc, error) {
			c, err := newConn()
			if err != nil {
				return nil, err
			}
			locks := make([]*zk.Lock, len(ns))
			for i, n := range ns {
				locks[i] = zk.NewLock(c, peers+"/zklock/"+n, acl)
			}
			return func(_ context.Context, w int) error {
				if err := locks[w].Lock(); err != nil {
					return err
				}
				return locks[w].Unlock()
			}, nil
		}},
		{implFloor, func(ns []string) (opFunc, error) {
			c, err := newConn()
			if err != nil {
				return nil, err
			}
			dir := peers + "/floor"
			if err := createParents(c, dir, acl); err != nil {
				return nil, err
			}
			return func(_ context.Context, w int) error {
				p, err := c.Create(dir+"/"+ns[w], nil, zk.FlagEphemeral, acl)
				if err != nil {
					return fmt.Errorf("create %s: %w", dir+"/"+ns[w], err)
				}
				return c.Delete(p, -1)
			}, nil
		}},
	})
	if err != nil {
		return err
	}

	sem, err := s.semaphoreCases(backend, []semImpl{
		simbaSemaphoreImpl(su, func(int) (simba.Backend, error) { return newBackend() }),
	})
	if err != nil {
		return err
	}
	ha, err := newBackend()
	if err != nil {
		return err
	}
	hb, err := newBackend()
	if err != nil {
		return err
	}
	ho, err := simbaHandover(su, s, backend, ha, hb)
	if err != nil {
		return err
	}
	var locks [2]*zk.Lock
	for i := range locks {
		c, err := newConn()
		if err != nil {
			return err
		}
		locks[i] = zk.NewLock(c, peers+"/zklock/handover", acl)
	}
	zkho := &handover{
		lid: lineID{backend, "zklock", opHandover}, s: s,
		acquire: func(_ context.Context, side int) (func(context.Context) error, error) {
			if err := locks[side].Lock(); err != nil {
				return nil, err
			}
			return func(context.Context) error { return locks[side].Unlock() }, nil
		},
	}
	su.groups = append(su.groups, group{cases: cases, rounds: s.rounds},
		group{cases: sem, rounds: s.rounds},
		group{cases: []benchCase{ho, zkho}, rounds: s.rounds})

	server := mntrCounter(servers[0])
	var herd []benchCase
	for _, w := range s.waiters {
		herd = append(herd, &herdHandover{
			lid: lineID{backend, implSimba, opHandoverW(w)}, s: s, waiters: w, server: server,
			open: func(ctx context.Context) (simba.Backend, func() error, error) {
				b, err := simbazk.Open(ctx, connect, simbazk.Options{Root: zkRoot, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					return nil, nil, err
				}
				return b, b.Close, nil
			},
		})
	}
	su.groups = append(su.groups, group{cases: herd, rounds: s.rounds})
	lb, err := newBackend()
	if err != nil {
		return err
	}
	su.groups = append(su.groups, group{cases: []benchCase{newListCase(backend, s.listHeld, lb)}, rounds: 1})
	return nil
}

// mntrCounter counts the requests the Zookeeper server at addr received
// (zk_packets_received of the mntr command, which the server must allow:
// 4lw.commands.whitelist). Other clients of the server count as well.
func mntrCounter(addr string) counter {
	return func(ctx context.Context) (int64, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, fmt.Errorf("mntr: %w", err)
		}
		defer conn.Close()
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		if _, err := io.WriteString(conn, "mntr"); err != nil {
			return 0, fmt.Errorf("mntr: %w", err)
		}
		out, err := io.ReadAll(conn)
		if err != nil {
			return 0, fmt.Errorf("mntr: %w", err)
		}
		return packetsReceived(string(out))
	}
}

// packetsReceived reads zk_packets_received from an mntr reply.
func packetsReceived(mntr string) (int64, error) {
	for line := range strings.Lines(mntr) {
		if v, ok := strings.CutPrefix(line, "zk_packets_received"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("mntr: zk_packets_received: %w", err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("mntr: no zk_packets_received in %q (is mntr in 4lw.commands.whitelist?)", firstLine(mntr))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// createParents creates path and its missing parents as persistent nodes.
func createParents(c *zk.Conn, path string, acl []zk.ACL) error {
	p := ""
	for part := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}
