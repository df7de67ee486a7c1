package simbazk_test

import (
	"context"
	"fmt"
	"log"
	"time"

	simbazk "github.com/simba-go/simba/backend-zk"
)

// A backend on a Zookeeper ensemble, with a digest identity: only that
// identity may change Simba's nodes. The engine (simba.New) normally drives
// the backend; here it is called directly.
func ExampleNew() {
	b, err := simbazk.New([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, simbazk.Options{
		Root: "/myapp/simba",
		Auth: "myapp:secret",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	grant, err := b.OpenSession(ctx, 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	// The server may grant less than asked (its maxSessionTimeout).
	fmt.Println("session", grant.ID, "valid for", grant.Remaining)

	r, err := b.Acquire(ctx, grant.ID, "report")
	if err != nil {
		log.Fatal(err)
	}
	if r.Won {
		fmt.Println("leader of report with fencing token", r.Token)
		_ = b.Release(ctx, grant.ID, "report", r.Token)
	}
	_ = b.CloseSession(ctx, grant.ID)
}

// A connect string may carry a chroot, placed before the root.
func ExampleOpen() {
	b, err := simbazk.Open("127.0.0.1:2181/tenant-a", simbazk.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Println(b.Root())
	// Output: /tenant-a/simba
}

// A candidate waits for the current holder to release, instead of polling.
func ExampleBackend_WatchRelease() {
	b, err := simbazk.New([]string{"127.0.0.1:2181"}, simbazk.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	released, err := b.WatchRelease(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-released: // free now: try to acquire
	case <-ctx.Done():
	}
}
