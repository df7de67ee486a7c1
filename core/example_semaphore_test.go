package simba_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// At most three exports run at once across every node; each holds a
// permit whose token fences its writes, and the tokens of the semaphore
// increase in the order the permits were granted.
func ExampleSemaphore() {
	store := memory.New()
	node1, _ := simba.New(store.Connect())
	defer node1.Close(context.Background())
	node2, _ := simba.New(store.Connect())
	defer node2.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var terms []*simba.LockTerm
	for _, node := range []*simba.Client{node1, node2, node1} {
		term, err := node.Semaphore("exports", 3).Acquire(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		terms = append(terms, term)
		fmt.Println("export running with token", term.Token())
	}
	_, err := node2.Semaphore("exports", 3).TryAcquire(ctx)
	fmt.Println("a fourth export:", errors.Is(err, simba.ErrLockHeld))
	_, err = node2.Semaphore("exports", 5).TryAcquire(ctx)
	fmt.Println("asked with 5 permits:", errors.Is(err, simba.ErrPermitsMismatch))
	for _, t := range terms {
		_ = t.Release(ctx)
	}
	// Output:
	// export running with token 1
	// export running with token 2
	// export running with token 3
	// a fourth export: true
	// asked with 5 permits: true
}
