// Package fxsimba wires Simba into a go.uber.org/fx application: the
// client is a value of the graph, its session closes when the app stops,
// and leader work (run-while-leader, scheduled and partitioned work) is
// declared as fx values that start with the app and stop with it.
//
// The graph provides a [simba.Backend]; [Module] turns it into a
// *[simba.Client]. Either provide the constructor yourself,
//
//	fx.Provide(fxsimba.Module)
//
// or include the ready-made option [Options], which also makes sure the
// client, and with it the leader work, is built even when nothing else in the
// graph asks for the client:
//
//	fxsimba.Options
//
// Leader work is registered with [AsLeaderWork], [AsScheduled] and
// [AsPartitioned] (or with [LeaderWork], [Scheduled] and [Partitioned]
// values provided to the "simba.work" value group). No work runs before the
// app starts. When the app stops, each work's context is cancelled and the
// stop waits for the ordered handover of every work (the work exits, or its
// term's deadline passes, before its lease is released: rule R-HO-1), then
// closes the client, all within the stop timeout.
//
// A work call that fails while the app runs (a *[simba.WorkError], or any
// other error that ends the call) is logged and shuts the app down through
// [fx.Shutdowner] with exit code 1, unless the work was given
// [simba.StepDownOnError]: then the failure only steps the election down, as
// core does. See docs/adr/0004-leader-work-outcomes.md for what ends each
// call, and docs/adr/0005-fxsimba-shape.md for the shape of this package.
//
// [ConfigFromEnv] reads the session timing from SIMBA_SESSION_*
// environment variables; an out-of-bounds value fails the app at start with
// an error naming the variable and the bound.
package fxsimba
