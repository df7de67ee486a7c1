// Command zk holds a lock on Zookeeper around one step. It uses the
// Zookeeper backend only, so its binary links no Redis or SQL driver.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	simbazk "github.com/simba-go/simba/backend-zk"
	simba "github.com/simba-go/simba/core"
)

func main() {
	if err := run(context.Background(), os.Getenv("ZK_SERVERS")); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, connect string) error {
	backend, err := simbazk.Open(ctx, connect, simbazk.Options{})
	if err != nil {
		return err
	}
	defer backend.Close()

	client, err := simba.New(backend)
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	acquireCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	term, err := client.Lock("nightly-report").Acquire(acquireCtx)
	if err != nil {
		return err
	}
	defer term.Release(context.Background())
	fmt.Println("holding nightly-report with fencing token", term.Token())
	return nil
}
