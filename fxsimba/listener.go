package fxsimba

import (
	"context"
	"fmt"

	simba "github.com/simba-go/simba/core"
	"go.uber.org/fx"
)

// EventListener receives the client's events (R-OBS-2). Module registers
// every listener of the ListenerGroup value group with the client: each
// gets every event in order on the client's callback executor, from a
// queue of its own, so a slow listener delays only itself, never the
// engine; one that falls more than the client's event buffer behind loses
// the oldest events and then gets a simba.EventDropped with their count. A
// listener that panics is logged and gets the next events.
type EventListener func(ctx context.Context, e simba.Event)

// AsEventListener provides fn to the ListenerGroup value group. A nil fn
// fails the app at fx.New.
func AsEventListener(fn func(ctx context.Context, e simba.Event)) fx.Option {
	if fn == nil {
		return fx.Error(fmt.Errorf("fxsimba: nil event listener: %w", simba.ErrInvalidArgument))
	}
	return fx.Supply(fx.Annotated{Group: ListenerGroup, Target: EventListener(fn)})
}
