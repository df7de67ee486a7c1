package proxy_test

import (
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/tools/chaos/internal/proxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo serves an echo server until the test ends.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

func roundTrip(c net.Conn, wait time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetDeadline(start.Add(wait))
	if _, err := c.Write([]byte("ping")); err != nil {
		return 0, err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func TestModes(t *testing.T) {
	p, err := proxy.Listen(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c, 2*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}

	p.Set(proxy.Slow, 100*time.Millisecond)
	if d, err := roundTrip(c, 2*time.Second); err != nil || d < 200*time.Millisecond {
		t.Fatalf("slow: round trip %v, %v; want at least 200ms (two delayed chunks)", d, err)
	}

	p.Set(proxy.BlackHole, 0)
	if _, err := roundTrip(c, 300*time.Millisecond); err == nil {
		t.Fatal("black hole: the echo came back")
	}
	p.Set(proxy.Pass, 0) // the held bytes flow again
	buf := make([]byte, 4)
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("after the black hole: %q, %v; want the held ping", buf, err)
	}

	p.Reset()
	if _, err := roundTrip(c, time.Second); err == nil {
		t.Fatal("reset: the connection still works")
	}

	p.Set(proxy.Refuse, 0)
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_, err = roundTrip(c2, time.Second)
		_ = c2.Close()
	}
	if err == nil {
		t.Fatal("refuse: a new connection works")
	}
}
