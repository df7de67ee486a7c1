package fencing_test

import (
	"fmt"

	"github.com/simba-go/simba/core/fencing"
)

// Ledger is state that only the current leader may change.
type Ledger struct {
	Settled []string
}

func ExampleValue() {
	var ledger fencing.Value[Ledger]

	// The leader of term 7 settles a batch, passing its term's token.
	settle := func(token uint64, batch string) bool {
		return ledger.Update(token, func(l *Ledger) { l.Settled = append(l.Settled, batch) })
	}
	fmt.Println(settle(7, "batch-1"))
	// Node B wins term 8 while node A is paused, and settles the next batch.
	fmt.Println(settle(8, "batch-2"))
	// Node A wakes up and retries with its old token: refused.
	fmt.Println(settle(7, "batch-2"))

	l, token := ledger.Load()
	fmt.Println(l.Settled, token)
	// Output:
	// true
	// true
	// false
	// [batch-1 batch-2] 8
}

func ExampleValue_Write() {
	var config fencing.Value[string]
	fmt.Println(config.Write(3, "v1"))
	fmt.Println(config.Write(3, "v1")) // a retry within term 3
	fmt.Println(config.Write(2, "old"))
	value, token := config.Load()
	fmt.Println(value, token)
	// Output:
	// true
	// true
	// false
	// v1 3
}
