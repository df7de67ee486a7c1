package simba_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
	_ "github.com/simba-go/simba/core/memory" // registers memory://
)

// A program links the backends it imports; the URL, from its
// configuration, picks one of them. Here the in-process memory backend:
// with backend-redis imported too, the same code opens
// "redis://redis.internal:6379/0".
func ExampleOpenBackend() {
	ctx := context.Background()
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := simba.OpenBackend(openCtx, "memory://example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close() // after the client: deferred calls run last in, first out

	client, err := simba.New(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(ctx)

	term, err := client.Lock("nightly-report").Acquire(openCtx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer term.Close()
	fmt.Println("holding nightly-report with token", term.Token())
	// Output: holding nightly-report with token 1
}

// A URL of a backend the program did not import fails with an error that
// says which package registers it.
func ExampleOpenBackend_unknownScheme() {
	_, err := simba.OpenBackend(context.Background(), "zk://zk1:2181,zk2:2181/app")
	fmt.Println(errors.Is(err, simba.ErrUnknownScheme))
	fmt.Println(err)
	// Output:
	// true
	// simba: unknown backend URL scheme "zk": import github.com/simba-go/simba/backend-zk to open it (registered: memory)
}

// A string without "scheme://" is refused without being quoted: it may be
// a DSN with a password.
func ExampleOpenBackend_noScheme() {
	_, err := simba.OpenBackend(context.Background(), "app:s3cr3t@tcp(db:3306)/app")
	fmt.Println(errors.Is(err, simba.ErrInvalidURL))
	fmt.Println(err)
	// Output:
	// true
	// simba: backend URL has no scheme: want SCHEME://... (registered: memory)
}

func ExampleBackendSchemes() {
	fmt.Println(simba.BackendSchemes())
	// Output: [memory]
}
