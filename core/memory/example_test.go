package memory_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// Two nodes contend for one lease; when the owner's session expires, the
// other node wins the next term with a higher token.
func Example() {
	ctx := context.Background()
	srv := memory.New()
	node1, node2 := srv.Connect(), srv.Connect()

	s1, _ := node1.OpenSession(ctx, 15*time.Second)
	s2, _ := node2.OpenSession(ctx, 15*time.Second)
	r1, _ := node1.Acquire(ctx, s1.ID, "report-job")
	r2, _ := node2.Acquire(ctx, s2.ID, "report-job")
	fmt.Println("node1 won:", r1.Won, "token", r1.Token)
	fmt.Println("node2 won:", r2.Won)

	srv.ExpireSession(s1.ID)
	r2, _ = node2.Acquire(ctx, s2.ID, "report-job")
	fmt.Println("node2 won:", r2.Won, "token", r2.Token)
	// Output:
	// node1 won: true token 1
	// node2 won: false
	// node2 won: true token 2
}

// A stalled connection black-holes every call until its context ends, as
// a network partition would; the store is untouched.
func ExampleConn_Stall() {
	srv := memory.New()
	node := srv.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()

	node.Stall()
	_, err := node.OpenSession(ctx, 15*time.Second)
	fmt.Println(errors.Is(err, context.DeadlineExceeded), len(srv.Sessions()))
	// Output: true 0
}

// Calls counts the calls that reached the store, per operation.
func ExampleServer_Calls() {
	ctx := context.Background()
	srv := memory.New()
	node := srv.Connect()
	s, _ := node.OpenSession(ctx, 15*time.Second)
	for range 3 {
		_, _ = node.KeepAlive(ctx, s.ID, simba.KeepAliveRequest{Lease: 15 * time.Second})
	}
	fmt.Println(srv.Calls()[memory.OpKeepAlive], node.Calls()[memory.OpOpenSession])
	// Output: 3 1
}

// TakeOver hands a lease to a phantom session, so that a test can check
// how the previous owner reacts to losing it.
func ExampleServer_TakeOver() {
	ctx := context.Background()
	srv := memory.New()
	s, _ := srv.OpenSession(ctx, 15*time.Second)
	_, _ = srv.Acquire(ctx, s.ID, "leader")

	token := srv.TakeOver("leader")
	held := map[string]uint64{"leader": 1}
	reply, _ := srv.KeepAlive(ctx, s.ID, simba.KeepAliveRequest{Lease: 15 * time.Second, Held: held})
	fmt.Println(token, reply.Lost)
	// Output: 2 [leader]
}

// Every Open of one memory:// URL in a process connects to the same store,
// so two nodes of a test or a demo contend for one lease. The store is
// this process's only.
func ExampleOpen() {
	ctx := context.Background()
	node1, err := memory.Open(ctx, "memory://example-open")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node1.Close()
	node2, err := memory.Open(ctx, "memory://example-open")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node2.Close()

	s1, _ := node1.OpenSession(ctx, 15*time.Second)
	s2, _ := node2.OpenSession(ctx, 15*time.Second)
	r1, _ := node1.Acquire(ctx, s1.ID, "report-job")
	r2, _ := node2.Acquire(ctx, s2.ID, "report-job")
	fmt.Println("node1 won:", r1.Won, "node2 won:", r2.Won)
	// Output: node1 won: true node2 won: false
}

// Close ends the calls a fault holds and fails every later call.
func ExampleConn_Close() {
	node := memory.New().Connect()
	node.Stall()
	done := make(chan error)
	go func() {
		_, err := node.OpenSession(context.Background(), 15*time.Second) // no deadline
		done <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the call reach the stall
	_ = node.Close()
	fmt.Println(errors.Is(<-done, memory.ErrClosed))
	// Output: true
}
