package simbaredis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	simbaredis "github.com/simba-go/simba/backend-redis"
	simba "github.com/simba-go/simba/core"
)

// Open connects from a URL and owns the connection; the Backend then drives
// a Simba client. The example needs a Redis server, so it is compiled but
// not run by go test.
func ExampleOpen() {
	ctx := context.Background()
	b, err := simbaredis.Open(ctx, os.Getenv("REDIS_URL"), simbaredis.Options{
		Password: os.Getenv("REDIS_PASSWORD"), // kept out of the URL
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	client, err := simba.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(ctx)

	acquireCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	term, err := client.Lock("nightly-report").Acquire(acquireCtx)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		// The term ends either way; an error only means the backend did
		// not confirm the release, and the session frees the lease later.
		if err := term.Release(ctx); err != nil {
			log.Printf("release nightly-report: %v", err)
		}
	}()
	fmt.Println("holding nightly-report with fencing token", term.Token())
}

// The class of Open's error tells a configuration mistake from a server
// that is down or refuses the credentials.
func ExampleOpen_errors() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, url := range []string{
		"redis://127.0.0.1:1/0",              // nothing listens on port 1
		"redis://app:pa#ss@127.0.0.1:6379/0", // a '#' in a password must be written %23
	} {
		_, err := simbaredis.Open(ctx, url, simbaredis.Options{})
		switch {
		case errors.Is(err, simbaredis.ErrInvalidOptions):
			fmt.Println("fix the URL or the options:", errors.Is(err, simba.ErrInvalidURL))
		case errors.Is(err, simbaredis.ErrAuth):
			fmt.Println("fix the credentials")
		case err != nil:
			fmt.Println("server unreachable")
		}
	}
	// Output:
	// server unreachable
	// fix the URL or the options: true
}

// Importing the package registers redis:// and rediss:// with
// simba.OpenBackend, which opens them with zero Options: a program that
// takes its backend URL from its configuration links the backends it
// imports and opens whichever the URL names. The example needs a Redis
// server, so it is compiled but not run by go test.
func Example_openBackend() {
	ctx := context.Background()
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := simba.OpenBackend(openCtx, os.Getenv("SIMBA_BACKEND")) // e.g. redis://redis.internal:6379/0
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

// New wraps a go-redis client the application already has; it stays the
// application's. On Redis Cluster the key prefix must carry a hash tag, and
// ContextTimeoutEnabled lets every call end at the engine's deadline.
func ExampleNew() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()

	b, err := simbaredis.New(rdb, simbaredis.Options{KeyPrefix: "{simba}:"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	client, err := simba.New(b)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close(context.Background())
}

// OnWarning hands operational warnings, such as an eviction policy that
// can evict lease hashes (read when the first session opens), to the
// application's alerting; Warnings lists what was found so far.
func ExampleOptions_onWarning() {
	b, err := simbaredis.Open(context.Background(), "redis://localhost:6379/0", simbaredis.Options{
		OnWarning: func(w simbaredis.Warning) {
			if w.Code == simbaredis.WarnEvictionPolicy {
				fmt.Println("page the on-call:", w.Message)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	for _, w := range b.Warnings() {
		fmt.Println(w.Code)
	}
}
