package simba_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// The JSON document of a snapshot, as the metrics handler, simba status and
// the C API print it (docs/snapshot.schema.json).
func ExampleSnapshot_Document() {
	client, err := simba.New(memory.New(), simba.WithIdentity("billing-1"))
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())
	term, err := client.Lock("invoice").Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	defer term.Close()

	body, err := json.Marshal(client.Snapshot().Document())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	var doc struct {
		Schema  string
		Session struct{ Identity, Status string }
		Leases  []struct {
			Name, State string
			Token       uint64
			RemainingMs int64
		}
	}
	_ = json.Unmarshal(body, &doc)
	fmt.Println(doc.Schema, doc.Session.Identity, doc.Session.Status)
	for _, l := range doc.Leases {
		fmt.Println(l.Name, l.State, l.Token, l.RemainingMs > 0)
	}
	// Output:
	// simba.snapshot/v1 billing-1 LIVE
	// invoice HOLDING 1 true
}
