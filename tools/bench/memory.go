package main

import (
	"context"

	simba "github.com/simba-go/simba/core"
	"github.com/simba-go/simba/core/memory"
)

// memorySuite measures the engine on the in-memory backend, where a
// backend call costs about nothing: simba is the engine's lock, floor the
// same backend calls made directly, handover the engine's release watch;
// then the same for the engine's semaphore.
func memorySuite(ctx context.Context, s *settings, _ string, su *suite) error {
	const backend = "memory"
	srv := memory.New()
	cases, err := s.implCases(backend, 64, []impl{
		{implSimba, func(ns []string) (opFunc, error) { return simbaLockOp(su, srv.Connect(), ns) }},
		{implFloor, func(ns []string) (opFunc, error) { return backendFloorOp(ctx, srv.Connect(), ns) }},
	})
	if err != nil {
		return err
	}
	sem, err := s.semaphoreCases(backend, []semImpl{
		simbaSemaphoreImpl(su, func(int) (simba.Backend, error) { return srv.Connect(), nil }),
		memorySemaphoreFloor(ctx, func() simba.Backend { return srv.Connect() }),
	})
	if err != nil {
		return err
	}
	ho, err := simbaHandover(su, s, backend, srv.Connect(), srv.Connect())
	if err != nil {
		return err
	}
	su.groups = append(su.groups, group{cases: cases, rounds: s.rounds},
		group{cases: sem, rounds: s.rounds},
		// Apart, so that its release subscriptions do not receive the
		// releases of the loops above.
		group{cases: []benchCase{ho}, rounds: s.rounds},
		group{cases: []benchCase{newListCase(backend, s.listHeld, srv.Connect())}, rounds: 1})
	return nil
}
