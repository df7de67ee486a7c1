// Package fence is the fenced resource of the robustness suite: one value
// per lease name, kept by the suite's own process, that accepts a write
// only when its token is at least the highest token accepted for the name
// (R-FEN-1), and records every decision in arrival order.
//
// Nodes reach it over a unix socket, never through the fault proxy, so a
// fault on the backend never touches the resource: a stale write reaches
// it exactly when the node sends one.
package fence

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/simba-go/simba/tools/chaos/internal/history"
)

// ErrRefused is returned by Client.Write for a write the resource refused.
var ErrRefused = errors.New("fence: stale token refused")

// Server is the resource. Start it with Serve, stop it with Close.
type Server struct {
	ln  net.Listener
	log *history.Writer

	mu      sync.Mutex
	highest map[string]uint64
	owner   map[string]string // the node whose write set highest, per name
	// handovers counts the names whose highest token passed to another
	// node: a live estimate of the run's progress.
	handovers int
	last      string // the node of the last accepted write
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// Listen opens the resource on the unix socket path; decisions go to log.
func Listen(path string, log *history.Writer) (*Server, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("fence: %w", err)
	}
	s := &Server{ln: ln, log: log, highest: map[string]uint64{}, owner: map[string]string{}, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve answers one node: each request is "NODE NAME TOKEN\n", each
// answer "1\n" (accepted) or "0\n" (refused).
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return
		}
		tok, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return
		}
		ok := s.write(f[0], f[1], tok)
		answer := "0\n"
		if ok {
			answer = "1\n"
		}
		if _, err := c.Write([]byte(answer)); err != nil {
			return
		}
	}
}

// write is the atomic check-and-store, recorded under the same lock so
// that the log's order is the order of the decisions.
func (s *Server) write(node, name string, token uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := token >= s.highest[name]
	if ok {
		if token > s.highest[name] && s.owner[name] != "" && s.owner[name] != node {
			s.handovers++
		}
		s.highest[name], s.owner[name], s.last = token, node, node
	}
	s.log.Add(history.Record{Kind: history.KindFence, Node: node, Name: name, Token: token, OK: ok})
	return ok
}

// Handovers returns how many times the highest token of a name passed to
// another node so far.
func (s *Server) Handovers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handovers
}

// Owner returns the node whose write set the highest token of name, "" before any.
func (s *Server) Owner(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owner[name]
}

// LastWriter returns the node of the last accepted write, "" before any.
func (s *Server) LastWriter() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Close stops accepting, drops every connection and waits for the
// goroutines of the server to exit.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	return nil
}

// Client is a node's connection to the resource. It is not safe for
// concurrent use: a node opens one per writer.
type Client struct {
	node string
	c    net.Conn
	r    *bufio.Reader
}

// Dial connects node to the resource at the unix socket path.
func Dial(ctx context.Context, path, node string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("fence: %w", err)
	}
	return &Client{node: node, c: c, r: bufio.NewReader(c)}, nil
}

// Write sends one fenced write. It returns nil when the resource accepted
// it, ErrRefused when it refused the token, and another error when the
// resource could not be reached.
func (c *Client) Write(name string, token uint64) error {
	if _, err := fmt.Fprintf(c.c, "%s %s %d\n", c.node, name, token); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if line != "1\n" {
		return ErrRefused
	}
	return nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }
