package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	simba "github.com/simba-go/simba/core"
)

const lockAbout = `
Acquires the lock NAME, runs COMMAND while holding it, releases the lock when
the command exits, and exits with the command's exit code. Every node that
runs "simba lock" with the same NAME and backend takes turns.

The command finds SIMBA_LEASE (the lock's name) and SIMBA_TOKEN (the fencing
token of this term, a decimal integer) in its environment. Pass the token with
every write to a shared resource and have the resource refuse a token lower
than the highest it has seen: that stops a holder whose lock ended while it
was paused.

The command runs as the leader of a process group of its own, and simba
stops the whole group: SIGTERM to every process in it, then SIGKILL to those
left after --grace. simba releases the lock only once no process of the group
is left (or SIGKILL was sent). When the command exits on its own, simba stops
what it left running in its group the same way before releasing the lock.

When the lock is lost while the command runs (no keep-alive succeeded before
the session's local deadline, the backend expired the session, or another
session took the lease over), simba stops the command's group and exits with
76. The command's processes may run for up to --grace after the loss, while
another node may already hold the lock. The default --grace is the safety
gap, --lease × drift + margin (200ms with the default --lease of 15s): the
time the backend keeps the lease after this node's local deadline, so that
the group is gone before another node can take the lock. simba warns when
--grace exceeds the gap. The gap is shorter when the backend expired the
session or another session took the lease over: then the lease is already
free. The fencing token is what protects a resource in every case.

On SIGINT, SIGTERM, SIGHUP or SIGQUIT simba stops the command's group the
same way, releases the lock and exits with the command's code. When simba
itself is killed (SIGKILL), the command gets SIGKILL from the kernel on Linux;
the other processes of its group run on.

Of simba's variables (SIMBA_*) the command sees only SIMBA_LEASE and
SIMBA_TOKEN: SIMBA_BACKEND, which may hold a password, is not passed on.

An outage is not contention: when --timeout passes while the backend cannot
be asked (no session is open, the last keep-alive failed, or every attempt
failed), simba exits with 69, not 75. With --timeout 0 it waits through an
outage.

With --backend memory:// the lock lives in this simba process only: another
process, even with the same URL, has a store of its own and takes the lock
too. simba warns about it on stderr; use memory:// for trials only.

With --permits N, NAME is a semaphore of N permits instead of a lock: up to
N commands run at once, each holding one permit, and the others wait. A
permit is the lease NAME:i of its slot i (0 to N-1), which the command finds
in SIMBA_LEASE; SIMBA_TOKEN is its fencing token, which strictly increases
per semaphore NAME. Every node must use the same N: while permits granted
under another number are held, simba exits with 1 at once. N is 1 to 1024.
Without --permits, NAME is a plain lock, which is not the same lease as a
semaphore of one permit.

Exit codes:
` + exitCodesFirst + `  69               the backend cannot be reached: at start, or while waiting
                   for the lock until --timeout
  75               the lock is held elsewhere: not acquired within --timeout
  76               the lock was lost while the command ran
` + exitCodesLast

// runLock is "simba lock NAME -- COMMAND...".
func runLock(ctx context.Context, a *app, args []string) int {
	const cmd = "lock"
	c := newCommandLine(cmd, "lock [flags] NAME -- COMMAND [ARG...]", lockAbout)
	timeout := c.Duration("timeout", 0, "give up when the lock is not acquired within this `duration`: exit code 75 when it is held elsewhere, "+
		"69 when the backend could not be asked; 0 waits for ever")
	permitsFlag := c.String("permits", "", "hold one of `N` permits of the semaphore NAME (1 to 1024) instead of the lock NAME")
	if code, ok := c.parse(a, args); !ok {
		return code
	}
	if *timeout < 0 {
		return a.usageError(cmd, fmt.Errorf("--timeout %v: must not be negative", *timeout))
	}
	permits, err := parsePermits(c.name, *permitsFlag, c.given("permits"))
	if err != nil {
		return a.usageError(cmd, err)
	}
	n, code := c.connect(ctx, a)
	if n == nil {
		return code
	}
	defer n.close(a, cmd)
	name := c.name
	what := "lock " + name
	if permits > 0 {
		what = fmt.Sprintf("semaphore %s (%d permits)", name, permits)
	}

	actx, cancel := ctx, context.CancelFunc(func() {})
	if *timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, *timeout)
	}
	var lt *simba.LockTerm
	if permits > 0 {
		lt, err = n.client.Semaphore(name, permits).Acquire(actx)
	} else {
		lt, err = n.client.Lock(name).Acquire(actx)
	}
	cancel()
	if err != nil && ctx.Err() == nil {
		n.close(a, cmd) // the report below is the last line
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return interruptedCode(ctx)
	case errors.Is(err, simba.ErrBackendUnavailable):
		// Checked first: such an error is a timeout too.
		code, why := n.watch.failure()
		a.report(cmd, "%s not acquired within %v on %s: %v%s", what, *timeout, n.where, err, why)
		return code
	case errors.Is(err, simba.ErrLockTimeout):
		a.report(cmd, "%s not acquired within %v", what, *timeout)
		return exitLockTimeout
	default:
		a.report(cmd, "acquire %s: %v", name, err)
		return exitFailure
	}
	if c.client.verbose {
		a.report(cmd, "acquired %s with token %d", lt.Name(), lt.Token())
	}
	defer releaseLock(a, lt)

	ch, err := startChild(a, c, lt.Term)
	if err != nil {
		a.report(cmd, "start %s: %v", c.argv[0], err)
		return startFailureCode(c.path, err)
	}
	select {
	case <-ch.done:
		ch.stopRest(a, cmd, c.grace)
		if !lt.Valid() {
			// The term ended before simba saw the command exit: part of
			// the command may have run without the lock.
			a.report(cmd, "lost lock %s (token %d) while the command ran: %s", lt.Name(), lt.Token(), endReason(lt.Term))
			return exitLockLost
		}
		return ch.exitCode()
	case <-lt.Done():
		a.report(cmd, "lost lock %s (token %d): %s; stopping the command", lt.Name(), lt.Token(), endReason(lt.Term))
		ch.stopGroup(a, cmd, c.grace)
		return exitLockLost
	case <-ctx.Done():
		ch.stopGroup(a, cmd, c.grace)
		return ch.exitCode()
	}
}

// parsePermits returns the number of permits of --permits (0 when it is
// not given), or why it is no number of permits a semaphore name may have.
// Given empty, it is refused: an unset variable in a node's command line
// must not turn its semaphore into a lock that the others do not share.
func parsePermits(name, flag string, given bool) (int, error) {
	switch {
	case !given:
		return 0, nil
	case flag == "":
		return 0, fmt.Errorf("--permits is empty: give a number of permits from 1 to %d", simba.MaxPermits)
	}
	n, err := strconv.Atoi(flag)
	if err != nil {
		return 0, fmt.Errorf("--permits %q: not a whole number", flag)
	}
	if n < 1 || n > simba.MaxPermits {
		return 0, fmt.Errorf("--permits %d: must be 1 to %d", n, simba.MaxPermits)
	}
	if err := simba.ValidatePermit(simba.Permit{Semaphore: name, Permits: n}); err != nil {
		return 0, fmt.Errorf("--permits %d: %w", n, err)
	}
	return n, nil
}

// releaseWait bounds the wait for a release at the end of a command.
const releaseWait = 5 * time.Second

// releaseLock releases lt, waiting at most releaseWait.
func releaseLock(a *app, lt *simba.LockTerm) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	if err := lt.Release(ctx); err != nil {
		a.report("lock", "release %s: %v (the backend frees it when the session ends)", lt.Name(), err)
	}
}

// endReason says why t ended, or that its local deadline passed before the
// engine revoked it.
func endReason(t *simba.Term) string {
	if r := t.Reason(); r != simba.NotRevoked {
		return r.String()
	}
	return simba.DeadlinePassed.String()
}
