package capi_test

import (
	"fmt"

	"github.com/simba-go/simba/cgo-bindings/internal/capi"
	_ "github.com/simba-go/simba/core/memory" // registers memory://
)

// What simba_client_open, simba_lock_acquire, simba_term_token and
// simba_term_free do on the Go side; errors map to SIMBA_* codes.
func Example() {
	client, err := capi.OpenClient("memory://example", capi.Options{LeaseMS: 3000})
	if err != nil {
		fmt.Println(capi.StatusOf(err), err)
		return
	}
	defer func() { _ = capi.CloseClient(client, 5000, 0) }()

	term, err := capi.Acquire(client, "nightly-job", 5000, 0, false)
	if err != nil {
		fmt.Println(capi.StatusOf(err), err)
		return
	}
	token, _ := capi.Token(term)
	fmt.Println("token", token)
	fmt.Println(capi.FreeTerm(term))

	_, err = capi.Acquire(client, "bad/name", 5000, 0, false)
	fmt.Println(capi.StatusOf(err))
	// Output:
	// token 1
	// <nil>
	// SIMBA_ERR_INVALID_NAME
}

// What simba_lease_holder and simba_run_while_leader do on the Go side:
// the work runs once per term, with a term handle valid until it returns.
func ExampleRunWhileLeader() {
	client, err := capi.OpenClient("memory://example-work", capi.Options{LeaseMS: 3000, Identity: "node-1"})
	if err != nil {
		fmt.Println(capi.StatusOf(err), err)
		return
	}
	defer func() { _ = capi.CloseClient(client, 5000, 0) }()

	work := func(_ int, term, token, _ uint64) capi.Status {
		h, held, _ := capi.Holder(client, "reporter", capi.NoTimeout, 0)
		fmt.Println("leading under token", token, "held by", h.Identity, held)
		return capi.OK // the work is done: the run returns
	}
	fmt.Println(capi.RunWhileLeader(client, "reporter", capi.NoTimeout, 0, work))
	_, held, _ := capi.Holder(client, "reporter", capi.NoTimeout, 0)
	fmt.Println("held after the run:", held)
	// Output:
	// leading under token 1 held by node-1 true
	// <nil>
	// held after the run: false
}
