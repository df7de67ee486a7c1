package simbaredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/core/backendtest"
)

// TestOpenSilentServerWithoutDeadline: an Open of a server that accepts
// connections and never answers, under a context without deadline, fails
// within go-redis's read timeout (the conformance suite checks an Open
// with a deadline).
func TestOpenSilentServerWithoutDeadline(t *testing.T) {
	url := "redis://" + backendtest.SilentListener(t) + "/0"
	var err error
	within(t, 2*time.Second, "Open of a silent server with read_timeout=500ms and no deadline", func() {
		_, err = Open(context.Background(), url+"?read_timeout=500ms", Options{})
	})
	if err == nil {
		t.Error("Open of a silent server succeeded")
	}
	t.Log(err)
}

// TestSilenceNamesWhatTimedOut: Open's error tells a dial that got no
// connection (an unreachable host) from a server that took the connection
// and never answered.
func TestSilenceNamesWhatTimedOut(t *testing.T) {
	dial := fmt.Errorf("redis: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded})
	read := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	if got := silence(dial); !strings.Contains(got, "no connection was made") {
		t.Errorf("silence(a dial timeout) = %q, want it to say no connection was made", got)
	}
	if got := silence(read); !strings.Contains(got, "accepted connections but never answered") {
		t.Errorf("silence(a read timeout) = %q, want it to say the server never answered", got)
	}
}
