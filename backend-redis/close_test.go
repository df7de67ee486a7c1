package simbaredis

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCloseWithAHungServer: Close returns soon although the server stopped
// answering the request that takes the Backend out of a lease's queue
// (the ZREM of a watch that ended), and leaves no goroutine behind.
func TestCloseWithAHungServer(t *testing.T) {
	srv := startHangingServer(t, "zrem")
	b, err := Open(callCtx(t), "redis://"+srv.addr+"/0", Options{KeyPrefix: testPrefix(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(callCtx(t))
	watchSubscribed(wctx, t, b, "n")
	cancel()
	for deadline := time.Now().Add(5 * time.Second); !srv.got("zrem"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no ZREM 5s after the watch ended")
		}
	}
	within(t, time.Second, "Close with a ZREM unanswered", func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
}

// hangingServer is an in-process server of the RESP protocol that answers
// just enough for a Backend to subscribe and watch (PING, SUBSCRIBE,
// EVALSHA replying 1, anything else +OK), except the commands it hangs
// on, which it records and never answers.
type hangingServer struct {
	addr string
	hang map[string]bool

	mu    sync.Mutex
	seen  map[string]bool
	conns []net.Conn
}

func startHangingServer(t *testing.T, hang ...string) *hangingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &hangingServer{addr: ln.Addr().String(), hang: map[string]bool{}, seen: map[string]bool{}}
	for _, c := range hang {
		s.hang[c] = true
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	return s
}

// got reports whether the server received cmd.
func (s *hangingServer) got(cmd string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[cmd]
}

func (s *hangingServer) serve(c net.Conn) {
	r := bufio.NewReader(c)
	subscribed := false
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		cmd := strings.ToLower(args[0])
		s.mu.Lock()
		s.seen[cmd] = true
		s.mu.Unlock()
		var reply string
		switch {
		case s.hang[cmd]:
			continue
		case cmd == "hello":
			reply = "-ERR unknown command 'hello'\r\n" // go-redis falls back to RESP2
		case cmd == "ping" && subscribed:
			reply = "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
		case cmd == "ping":
			reply = "+PONG\r\n"
		case cmd == "subscribe":
			subscribed = true
			for i, ch := range args[1:] {
				reply += fmt.Sprintf("*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:%d\r\n", len(ch), ch, i+1)
			}
		case cmd == "evalsha":
			reply = ":1\r\n"
		default:
			reply = "+OK\r\n"
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

// readCommand reads one command, an array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	args := make([]string, n)
	for i := range args {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, fmt.Errorf("not a bulk string: %q", line)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}
