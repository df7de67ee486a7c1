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
