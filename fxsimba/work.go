package fxsimba

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	simba "github.com/simba-go/simba/core"
	"go.uber.org/fx"
)

// Work is leader work that Module runs while the app runs: the counterpart
// of the spec's @SimbaScheduled and @SimbaPartitioned. Build it with
// LeaderWork, Scheduled or Partitioned; the zero Work is invalid. A Work
// that was built with invalid arguments carries the error, and Module
// returns it, so a bad work fails the app at start.
//
// Provide it with AsLeaderWork, AsScheduled or AsPartitioned, or from a
// constructor of your own annotated with the WorkGroup result tag, when the
// work function needs values of the graph:
//
//	fx.Provide(fx.Annotate(
//		func(db *sql.DB) fxsimba.Work { return fxsimba.Scheduled("purge", time.Hour, purgeWith(db)) },
//		fx.ResultTags(`group:"simba.work"`),
//	))
//
// Such a constructor must not depend on the *simba.Client: Module, which
// builds the client, consumes the work (fx reports the cycle at start).
type Work struct {
	kind  workKind
	name  string // the lease name, or the group name
	every time.Duration
	n     int
	fn    simba.WorkFunc
	pfn   simba.PartitionFunc
	opts  []simba.WorkOption
	err   error
}

type workKind int

const (
	kindLeader workKind = iota + 1
	kindScheduled
	kindPartitioned
)

// LeaderWork is work that runs once per term the node wins on the lease
// name, with a context that ends with the term, through
// Election.RunWhileLeader (R-WORK-1). Returning nil while the term lasts
// means the work is done: the node stops leading name and the app goes on.
// Returning an error shuts the app down, unless opts include
// simba.StepDownOnError.
func LeaderWork(name string, fn simba.WorkFunc, opts ...simba.WorkOption) Work {
	w := Work{kind: kindLeader, name: name, fn: fn, opts: opts}
	w.err = w.check(fn == nil)
	return w
}

// Scheduled is work that runs every period on the leader of the lease name
// only, through Election.Schedule (R-WORK-2); opts may set an initial delay
// (simba.WithInitialDelay) or a fixed delay between runs
// (simba.FixedDelay). A failed run is reported (logged and published as an
// EventWorkFailed) and the schedule goes on; with simba.StepDownOnError the
// node steps down instead. It never shuts the app down by itself.
func Scheduled(name string, period time.Duration, fn simba.WorkFunc, opts ...simba.WorkOption) Work {
	w := Work{kind: kindScheduled, name: name, every: period, fn: fn, opts: opts}
	w.err = w.check(fn == nil)
	if w.err == nil && period <= 0 {
		w.err = fmt.Errorf("fxsimba: %s: the period must be positive: %w", w, simba.ErrInvalidArgument)
	}
	return w
}

// Partitioned is work spread over the nodes that run it: n partitions,
// partition i held under the lease "group.i" by at most one node at a time,
// through Group.Run (R-GRP-1, R-GRP-2). fn runs once per term of each
// partition this node wins. A partition's fn that returns nil gives the
// partition up for a while; one that returns an error shuts the app down,
// unless opts include simba.StepDownOnError.
func Partitioned(group string, n int, fn simba.PartitionFunc, opts ...simba.WorkOption) Work {
	w := Work{kind: kindPartitioned, name: group, n: n, pfn: fn, opts: opts}
	w.err = w.check(fn == nil)
	switch {
	case w.err != nil:
	case n < 1 || n > simba.MaxPartitions:
		w.err = fmt.Errorf("fxsimba: %s: want 1 to %d partitions: %w", w, simba.MaxPartitions, simba.ErrInvalidArgument)
	default:
		if err := simba.ValidateName(partitionName(group, n-1)); err != nil {
			w.err = fmt.Errorf("fxsimba: %s: the partition names would be too long: %w", w, err)
		}
	}
	return w
}

// check checks the name and the function, common to every kind.
func (w Work) check(nilFn bool) error {
	if err := simba.ValidateName(w.name); err != nil {
		return fmt.Errorf("fxsimba: %s: %w", w, err)
	}
	if nilFn {
		return fmt.Errorf("fxsimba: %s: nil work function: %w", w, simba.ErrInvalidArgument)
	}
	return nil
}

// String describes the work, for logs and errors.
func (w Work) String() string {
	switch w.kind {
	case kindLeader:
		return fmt.Sprintf("leader work %q", w.name)
	case kindScheduled:
		return fmt.Sprintf("scheduled work %q every %v", w.name, w.every)
	case kindPartitioned:
		return fmt.Sprintf("partitioned work %q of %d partitions", w.name, w.n)
	}
	return "empty work"
}

// leases returns the lease names the work uses.
func (w Work) leases() []string {
	if w.kind != kindPartitioned {
		return []string{w.name}
	}
	out := make([]string, w.n)
	for i := range out {
		out[i] = partitionName(w.name, i)
	}
	return out
}

func partitionName(group string, i int) string { return group + "." + strconv.Itoa(i) }

// call makes the work's blocking call on c until ctx ends.
func (w Work) call(ctx context.Context, c *simba.Client) error {
	switch w.kind {
	case kindLeader:
		return c.Election(w.name).RunWhileLeader(ctx, w.fn, w.opts...)
	case kindScheduled:
		return c.Election(w.name).Schedule(ctx, w.every, w.fn, w.opts...)
	default:
		return c.Group(w.name, w.n).Run(ctx, w.pfn, w.opts...)
	}
}

// checkWork returns the errors of the works, and an error for every lease
// name that two of them would use.
func checkWork(ws []Work) error {
	var errs []error
	owner := make(map[string]Work)
	for i, w := range ws {
		switch {
		case w.err != nil:
			errs = append(errs, w.err)
			continue
		case w.kind == 0:
			errs = append(errs, fmt.Errorf("fxsimba: work %d of the group %q is empty: build it with LeaderWork, Scheduled or Partitioned: %w",
				i, WorkGroup, simba.ErrInvalidArgument))
			continue
		}
		for _, l := range w.leases() {
			if o, ok := owner[l]; ok {
				errs = append(errs, fmt.Errorf("fxsimba: %s and %s both use the lease %q: %w", o, w, l, simba.ErrInvalidArgument))
				break
			}
			owner[l] = w
		}
	}
	return errors.Join(errs...)
}

// AsLeaderWork provides LeaderWork(name, fn, opts...) to the app. Invalid
// arguments fail the app at fx.New.
func AsLeaderWork(name string, fn simba.WorkFunc, opts ...simba.WorkOption) fx.Option {
	return provideWork(LeaderWork(name, fn, opts...))
}

// AsScheduled provides Scheduled(name, period, fn, opts...) to the app.
// Invalid arguments fail the app at fx.New.
func AsScheduled(name string, period time.Duration, fn simba.WorkFunc, opts ...simba.WorkOption) fx.Option {
	return provideWork(Scheduled(name, period, fn, opts...))
}

// AsPartitioned provides Partitioned(group, n, fn, opts...) to the app.
// Invalid arguments fail the app at fx.New.
func AsPartitioned(group string, n int, fn simba.PartitionFunc, opts ...simba.WorkOption) fx.Option {
	return provideWork(Partitioned(group, n, fn, opts...))
}

// provideWork supplies w to the work group, and makes sure the client that
// runs it is built.
func provideWork(w Work) fx.Option {
	if w.err != nil {
		return fx.Error(w.err)
	}
	return fx.Options(
		fx.Supply(fx.Annotated{Group: WorkGroup, Target: w}),
		fx.Invoke(requireClient),
	)
}
