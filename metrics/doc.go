// Package simbametrics exports the state of a Simba client to Prometheus,
// and serves its snapshot as JSON.
//
// A [Collector] has two inputs. The client's events (simba.Event), which it
// receives as an event listener, drive the counters and histograms: terms
// won and ended by reason, keep-alive round trips and failures, lock
// acquisition waits, failed leader work, panicking listeners, and the
// session status. The client's snapshot, which it reads at every scrape,
// gives the gauges that describe the present: the time left on the session
// and on each held term, the renew interval in effect, and the partitions
// held per group. The listener must be given when the client is built, so
// the wiring takes three steps:
//
//	col, err := simbametrics.New() // an error names an option that is not valid
//	// handle err
//	client, err := simba.New(backend, simba.WithEventListener(col.Observe))
//	// handle err
//	col.Attach(client)
//	registry.MustRegister(col)
//
// A Collector without Attach reports only what events give; one whose
// Observe is not registered reports only what the snapshot gives (and a
// session status stuck at OPENING). One Collector serves one client: for
// several clients in one process, register each Collector through
// prometheus.WrapRegistererWith with a label that tells them apart.
//
// Lease names become the label lease on the per-lease metrics. Election
// names are usually a fixed set written in the code, so they are kept as
// they are by default; lock names are often made from data (a lock per
// order, per tenant), so by default every lock shares the one label value
// [OtherLeases]. [WithLeaseLabel] maps names to label values of your own and
// [WithoutLeaseLabel] removes the label.
//
// [SnapshotHandler] serves a client's snapshot as JSON for people and
// scripts; README.md documents its fields, which are stable.
package simbametrics
