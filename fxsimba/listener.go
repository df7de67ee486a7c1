package fxsimba

import (
	"context"
	"fmt"
	"log/slog"

	simba "github.com/simba-go/simba/core"
	"go.uber.org/fx"
)

// EventListener receives the client's events (R-OBS-2). Module calls every
// listener of the ListenerGroup value group for each event, one after the
// other, on the client's callback executor: a slow listener delays the
// others and the next events, never the engine.
type EventListener func(ctx context.Context, e simba.Event)

// AsEventListener provides fn to the ListenerGroup value group. A nil fn
// fails the app at fx.New.
func AsEventListener(fn func(ctx context.Context, e simba.Event)) fx.Option {
	if fn == nil {
		return fx.Error(fmt.Errorf("fxsimba: nil event listener: %w", simba.ErrInvalidArgument))
	}
	return fx.Supply(fx.Annotated{Group: ListenerGroup, Target: EventListener(fn)})
}

// fanOut returns one listener that calls each of ls in turn, so that the
// client, which takes one listener, feeds them all. A listener that panics
// is logged, and the next one still gets the event.
func fanOut(ls []EventListener, log *slog.Logger) func(context.Context, simba.Event) {
	if len(ls) == 1 {
		return ls[0] // core recovers and logs a panic of its one listener
	}
	return func(ctx context.Context, e simba.Event) {
		for i, l := range ls {
			callListener(ctx, l, e, func(r any) {
				log.Error("fxsimba: event listener panicked", "listener", i, "event", e.Kind.String(), "panic", r)
			})
		}
	}
}

func callListener(ctx context.Context, l EventListener, e simba.Event, panicked func(any)) {
	defer func() {
		if r := recover(); r != nil {
			panicked(r)
		}
	}()
	l(ctx, e)
}
