package simbazk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	simbazk "github.com/simba-go/simba/backend-zk"
	simba "github.com/simba-go/simba/core"
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

// Open checks that a server of the ensemble answers before it returns. A
// connect string may carry a chroot, placed before the root. The example
// needs a Zookeeper server, so it is compiled but not run by go test.
func ExampleOpen() {
	ctx := context.Background()
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := simbazk.Open(openCtx, "zk1:2181,zk2:2181,zk3:2181/tenant-a", simbazk.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Println("leases under", b.Root()+"/leases") // /tenant-a/simba/leases

	client, err := simba.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)
}

// The class of Open's error tells a configuration mistake from an ensemble
// that does not answer.
func ExampleOpen_errors() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, connect := range []string{
		"127.0.0.1:1",        // nothing listens on port 1
		"zk1:2181/tenant-a/", // a chroot cannot end with "/"
	} {
		_, err := simbazk.Open(ctx, connect, simbazk.Options{})
		switch {
		case errors.Is(err, simbazk.ErrInvalidOptions):
			fmt.Println("fix the connect string or the options")
		case err != nil:
			fmt.Println("no server answered")
		}
	}
	// Output:
	// no server answered
	// fix the connect string or the options
}

// A zk:// URL carries the servers, the chroot and a digest identity, taken
// literally up to the last '@'.
func ExampleParseURL() {
	connect, auth, err := simbazk.ParseURL("zk://app:p@ss/w0rd@zk1:2181,zk2:2181/tenant-a")
	if err != nil {
		log.Fatal(err)
	}
	user, _, _ := strings.Cut(auth, ":")
	fmt.Println(connect, "as", user)

	_, _, err = simbazk.ParseURL("zk://app:p@ss/w0rd@zk1,zk2:2181")
	fmt.Println(err, errors.Is(err, simba.ErrInvalidURL))
	// Output:
	// zk1:2181,zk2:2181/tenant-a as app
	// simbazk: options URL: server "zk1": no port: want HOST:PORT true
}

// Importing the package registers zk:// with simba.OpenBackend, which opens
// the URL with zero Options but the URL's digest identity. The example
// needs a Zookeeper server, so it is compiled but not run by go test.
func Example_openBackend() {
	ctx := context.Background()
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := simba.OpenBackend(openCtx, os.Getenv("SIMBA_BACKEND")) // e.g. zk://app:secret@zk1:2181,zk2:2181/tenant-a
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	client, err := simba.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)
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
