// Command redis runs a job on one node at a time, elected on Redis. It uses
// the Redis backend only, so its binary links no other driver.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	simbaredis "github.com/simba-go/simba/backend-redis"
	simba "github.com/simba-go/simba/core"
)

func main() {
	if err := run(context.Background(), os.Getenv("REDIS_URL")); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string) error {
	backend, err := simbaredis.Open(ctx, url, simbaredis.Options{})
	if err != nil {
		return err
	}
	defer backend.Close()

	client, err := simba.New(backend)
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	return client.Election("report").RunWhileLeader(ctx, func(ctx context.Context, t *simba.Term) error {
		fmt.Println("leading report with fencing token", t.Token())
		return nil
	})
}
