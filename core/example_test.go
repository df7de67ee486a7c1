package simba_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

func ExampleClient_Election() {
	client, err := simba.New(memory.New())
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())

	elected := make(chan *simba.Term, 1)
	election := client.Election("report")
	err = election.Start(simba.ListenerFuncs{
		Elected: func(ctx context.Context, t *simba.Term) { elected <- t },
		Revoked: func(ctx context.Context, t *simba.Term, reason simba.RevokeReason) {
			fmt.Println("revoked:", reason)
		},
	})
	if err != nil {
		panic(err)
	}
	t := <-elected
	fmt.Println("leading with token", t.Token())
	_ = election.Stop(context.Background())
	// Output:
	// leading with token 1
	// revoked: STOPPED
}

func ExampleLock_Acquire() {
	client, _ := simba.New(memory.New())
	defer client.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	term, err := client.Lock("invoice-42").Acquire(ctx)
	switch {
	case errors.Is(err, simba.ErrBackendUnavailable):
		fmt.Println("the backend did not answer within 5s")
		return
	case errors.Is(err, simba.ErrLockTimeout):
		fmt.Println("held elsewhere for 5s")
		return
	case err != nil:
		fmt.Println(err)
		return
	}
	defer term.Close()
	if err := term.EnsureValid(2 * time.Second); err != nil {
		return // too little time left for the step
	}
	fmt.Println("writing with fencing token", term.Token())
	// Output: writing with fencing token 1
}

// A worker that takes one lock per item gives each back without waiting
// for the backend: the next Acquire does not queue behind the release.
func ExampleLockTerm_ReleaseAsync() {
	client, _ := simba.New(memory.New())
	defer client.Close(context.Background())

	ctx := context.Background()
	var last <-chan error
	for _, order := range []string{"order-1", "order-2", "order-3"} {
		term, err := client.Lock(order).Acquire(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("shipping", order, "with token", term.Token())
		last = term.ReleaseAsync()
	}
	fmt.Println("last release:", <-last)
	// Output:
	// shipping order-1 with token 1
	// shipping order-2 with token 1
	// shipping order-3 with token 1
	// last release: <nil>
}

func ExampleValidateName() {
	fmt.Println(simba.ValidateName("billing.3"))
	fmt.Println(simba.ValidateName("billing/3"))
	// Output:
	// <nil>
	// simba: invalid lease name "billing/3": character '/' at byte 7 is not one of [A-Za-z0-9._:-]
}

func ExampleConfig_Validate() {
	cfg := simba.DefaultConfig()
	cfg.RenewInterval = 10 * time.Second
	fmt.Println(cfg.Validate())
	// Output: simba: config RenewInterval: 10s: two keep-alives must fit in LeaseDuration 15s
}
