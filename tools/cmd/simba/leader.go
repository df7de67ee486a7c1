package main

import (
	"context"
	"strings"

	simba "github.com/simba-go/simba/core"
)

const leaderAbout = `
Runs COMMAND whenever this node is the leader of NAME. The node contends for
the lease NAME; when it wins a term it starts the command, when the term ends
it stops the command (SIGTERM, then SIGKILL after --grace), and when it wins a
new term it starts the command again. Run the same line on several machines:
one of them runs the command at a time.

The command finds SIMBA_LEASE (the lease name) and SIMBA_TOKEN (the fencing
token of the current term, a decimal integer that grows with every term) in
its environment; of simba's variables (SIMBA_*) it sees only these two:
SIMBA_BACKEND, which may hold a password, is not passed on. A term can end
while the command still runs, for as long as it takes to stop it: pass the
token with every write to a shared resource and have the resource refuse a
token lower than the highest it has seen.

The command runs as the leader of a process group of its own, and simba
stops the whole group: SIGTERM to every process in it, then SIGKILL to those
left after --grace; a new term starts the command only once the group is
gone. After a term ends another node may already lead: the command's
processes may run for up to --grace. The default --grace is the safety gap,
--lease × drift + margin (200ms with the default --lease of 15s): the time
the backend keeps the lease after this node's local deadline, so that the
group is gone before another node can take the lease over. simba warns when
--grace exceeds the gap.

When the command exits on its own while this node leads, simba stops what it
left running in its group, gives the lease up, so that another node takes
over, and exits with the command's exit code. On SIGINT, SIGTERM, SIGHUP or
SIGQUIT simba stops the command's group, gives the lease up and exits with
the command's code, or 128+N (130 for SIGINT, 143 for SIGTERM) when no
command was running. When simba itself is killed (SIGKILL), the command gets
SIGKILL from the kernel on Linux; the other processes of its group run on.

With --backend memory:// the lease lives in this simba process only: another
process, even with the same URL, has a store of its own and leads too. simba
warns about it on stderr; use memory:// for trials only.

Exit codes:
` + exitCodesFirst + `  69               the backend cannot be reached
` + exitCodesLast

// exitCodesFirst and exitCodesLast are the exit codes simba leader and
// simba lock share, before and after their own.
const (
	exitCodesFirst = `  the command's    when it exits on its own (128+N when signal N ended it)
  1                simba itself failed
  2                bad usage: unknown flag, missing NAME or COMMAND, invalid
                   name, bad backend URL (scheme, host or port), --lease above
                   the backend's maximum (24h on PostgreSQL and MySQL), an
                   empty --table-prefix, --table-prefix on a backend without
                   tables
`
	exitCodesLast = `  78               the backend is not set up: PostgreSQL or MySQL tables of
                   --table-prefix missing or outdated (create them with
                   --migrate, or apply the schema script), the URL's
                   database missing, or the tables refused to its user
  126              the command is not executable
  127              the command was not found
  129              stopped by SIGHUP while no command ran
  130              stopped by SIGINT (Ctrl-C) while no command ran
  131              stopped by SIGQUIT while no command ran
  143              stopped by SIGTERM while no command ran
`
)

// runLeader is "simba leader NAME -- COMMAND...".
func runLeader(ctx context.Context, a *app, args []string) int {
	const cmd = "leader"
	c := newCommandLine(cmd, "leader [flags] NAME -- COMMAND [ARG...]", leaderAbout)
	if code, ok := c.parse(a, args); !ok {
		return code
	}
	n, code := c.connect(ctx, a)
	if n == nil {
		return code
	}
	defer n.close(a, cmd)
	name, argv := c.name, c.argv

	// The listener hands each term to the loop below; a term that ends
	// before the loop takes it is dropped.
	terms := make(chan *simba.Term)
	done := make(chan struct{})
	defer close(done)
	el := n.client.Election(name)
	err := el.Start(simba.ListenerFuncs{Elected: func(_ context.Context, t *simba.Term) {
		select {
		case terms <- t:
		case <-t.Done():
		case <-done:
		}
	}})
	if err != nil {
		a.report(cmd, "start election %s: %v", name, err)
		return exitFailure
	}
	defer stopElection(a, el)

	program := strings.Join(argv, " ")
	for {
		var t *simba.Term
		select {
		case t = <-terms:
		case <-ctx.Done():
			return interruptedCode(ctx)
		}
		if !t.Valid() {
			continue
		}
		a.report(cmd, "leading %s with token %d: starting %s", name, t.Token(), program)
		ch, err := startChild(a, c, t)
		if err != nil {
			a.report(cmd, "start %s: %v", argv[0], err)
			return startFailureCode(c.path, err)
		}
		select {
		case <-ch.done:
			ch.stopRest(a, cmd, c.grace)
			a.report(cmd, "%s exited with code %d: giving %s up", argv[0], ch.exitCode(), name)
			return ch.exitCode()
		case <-t.Done():
			a.report(cmd, "term of %s with token %d ended: %s; stopping %s", name, t.Token(), endReason(t), argv[0])
			ch.stopGroup(a, cmd, c.grace)
			a.report(cmd, "%s stopped (exit code %d); waiting for the next term", argv[0], ch.exitCode())
		case <-ctx.Done():
			ch.stopGroup(a, cmd, c.grace)
			return ch.exitCode()
		}
	}
}

// stopElection stops el, which gives its lease up, waiting at most
// releaseWait.
func stopElection(a *app, el *simba.Election) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseWait)
	defer cancel()
	if err := el.Stop(ctx); err != nil {
		a.report("leader", "stop election %s: %v", el.Name(), err)
	}
}
