package fencingtest_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/simba-go/simba/core/fencing"
	"github.com/simba-go/simba/core/fencingtest"
)

// valueResource adapts a fencing.Value to the kit's Resource interface.
type valueResource struct{ v fencing.Value[string] }

func (r *valueResource) Write(_ context.Context, token uint64, value string) (bool, error) {
	return r.v.Write(token, value), nil
}

func (r *valueResource) State(context.Context) (uint64, string, error) {
	value, token := r.v.Load()
	return token, value, nil
}

// strictResource refuses a token equal to the highest, so a writer cannot
// retry within its own term.
type strictResource struct {
	mu    sync.Mutex
	token uint64
	value string
}

func (r *strictResource) Write(_ context.Context, token uint64, value string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if token <= r.token {
		return false, nil
	}
	r.token, r.value = token, value
	return true, nil
}

func (r *strictResource) State(context.Context) (uint64, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.token, r.value, nil
}

func ExampleCheck() {
	failures := fencingtest.Check(context.Background(), func(context.Context) (fencingtest.Resource, error) {
		return &valueResource{}, nil
	})
	fmt.Println("failures:", len(failures))
	// Output: failures: 0
}

func ExampleCheck_brokenResource() {
	failures := fencingtest.Check(context.Background(), func(context.Context) (fencingtest.Resource, error) {
		return &strictResource{}, nil
	})
	for _, f := range failures {
		fmt.Println(f.Check)
	}
	// Output:
	// EqualToken
}
