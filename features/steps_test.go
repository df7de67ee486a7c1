package features

// registerSteps binds every step of the suite: the whole vocabulary, in one
// place. Each pattern names what its steps are about (nodes, a node's
// term, its listener, the backend, the simba command, ...) and ends with
// the rest of the sentence, which one of its phrases reads (see
// phrases_test.go); a phrase's code is a method of world, in the
// steps_*_test.go file of its topic. A pattern that begins with
// withinGroup takes an optional `within <duration>`, which its timed
// phrases wait for.
func (w *world) registerSteps(step func(string, any)) {
	// Nodes: steps_nodes_test.go
	step(`^nodes? (.+)$`, phrases{
		say(`([A-Z]) is connected(.*)`, w.connectedAs),
		say(`((?:[A-Z], )*[A-Z]) and ([A-Z]) are connected`, w.nodesConnected),
		say(`([A-Z]) joins with its only event listener stuck on its first event and a buffer of (\d+) events`, w.connectedStuck),
	})
	step(`^each of ((?:[A-Z], )*[A-Z]) and ([A-Z]) closes and connects again, (\d+) times$`, w.reconnectEach)
	step(`^([^']+) pass(?:es)?$`, w.timePasses)

	// What nodes do, and did: steps_nodes, _elections, _candidates,
	// _handover, _locks, _work, _groups, _holder, _fencing, _fx.
	step(withinGroup+`((?:[A-Z], )*[A-Z](?: and [A-Z])?) (.+)$`, phrases{
		say(`closes?`, w.closeAll),
		say(`made no backend call`, w.noBackendCall),
		say(`each send (\d+) keep-alives, give or take one, in the next (.+)`, w.keepAlivesOver),
		say(`opened exactly one session, which all of its terms belong to`, w.oneSession),
		say(`made calls of every kind: (.+)`, w.callsOfEveryKind),
		say(`published (no|one|two) SessionLeaseShortened events?(?:, for a grant of (.+)|, one per session)?`, w.shortenedEvents),
		say(`logged exactly one warning about the shortened lease`, w.oneWarning),

		say(`starts? the election "([^"]*)"`, w.startElections),
		say(`is leader of "([^"]*)"`, w.isLeader),
		timed(`is leader of "([^"]*)"( again)?(, with a higher token(?: than ([A-Z])'s lock term)?)?`, w.becomesLeader),
		say(`is leader of "([^"]*)" within one lease duration plus one candidate attempt of ([A-Z])'s stall`, w.failover),
		say(`is leader of (\d+) elections and holds (\d+) locks`, w.leadsMany),
		say(`is not leader of "([^"]*)" during (.+)`, w.notLeaderDuring),
		say(`stops the election "([^"]*)"`, w.stops),
		say(`begins to stop the election "([^"]*)"`, w.beginsToStop),
		say(`steps down from "([^"]*)" for (.+)`, w.stepsDown),
		say(`stops and starts the election "([^"]*)" again, (\d+) times, each time while its attempt is in flight`, w.restartInFlight),
		say(`stops the election "([^"]*)" while its acquire is in flight`, w.stopsInFlight),
		say(`released (.+), each with the token of its term, once the term had been revoked`, w.releasedWithTokens),
		say(`were given (\d+) terms of "([^"]*)" between them`, w.termsBetween),
		timed(`wins a term of "([^"]*)" on the backend`, w.winsOnBackend),

		say(`has made (\d+) attempts at "([^"]*)"`, w.madeAttempts),
		say(`made exactly (\d+) attempts? at "([^"]*)"`, w.madeExactly),
		say(`is watching for the release of "([^"]*)"`, w.watching),
		say(`won "([^"]*)" at its first attempt after ([A-Z])'s stop, long before its next regular attempt was due`, w.wonAtOnce),
		say(`won "([^"]*)" at its first attempt after ([A-Z])'s stop, which was a regular one: at least half a renew interval after the refused attempt`, w.wonAtNextAttempt),
		say(`never had two attempts at "([^"]*)" in flight at once`, w.oneInFlight),
		timed(`released the term its held acquire reply won`, w.releasedHeldWin),
		say(`was never elected with the token its held acquire reply carried`, w.neverElectedWithHeld),
		say(`makes no attempt at "([^"]*)" until (.+) after (its step-down|its win on the backend)`, w.noAttemptUntil),
		say(`makes no attempt at "([^"]*)" during (.+)`, w.noAttemptDuring),

		say(`runs leader work for "([^"]*)" that,? (.+)`, w.runsWork),
		say(`released "([^"]*)" at the local deadline its term had at its stop, while the work was still running`, w.releasedAtDeadline),
		say(`sent no release for its term of "([^"]*)"`, w.noRelease),
		say(`schedules "([^"]*)" every (\S+)(, with a fixed delay)?(?:, first after (\S+))?(?:, each run taking (\S+))?`, w.schedules),
		say(`ran "([^"]*)" once per period from each term's start while it led(, give or take one)?`, w.ranPerPeriod),
		say(`never ran "([^"]*)"`, w.neverRan),
		say(`runs? the group "([^"]*)" of (\d+) partitions`, w.runGroup),
		say(`leaves the group "([^"]*)"`, w.leaveGroup),

		say(`holds the lock "([^"]*)"`, w.holdsLock),
		say(`holds the lock named (.+), with a token above zero`, w.holdsNamed),
		say(`acquires the lock ("[^"]*"|named .+) within (.+)`, w.acquires),
		say(`begins to acquire the lock "([^"]*)" within (.+)`, w.beginsToAcquire),
		say(`releases the lock ("[^"]*"|named .+)`, w.releasesLock),
		say(`cancels its acquisition of "([^"]*)"`, w.cancelsAcquisition),
		say(`calls (Acquire|TryAcquire) on the lock (.+) with (a nil context|an expired context|a timeout of 0|a cancelled context|a live context)`, w.callsLock),
		say(`takes and releases the lock "([^"]*)" (\d+) times`, w.lockCycles),
		say(`hands its term of "([^"]*)" to another goroutine, which releases it without error`, w.handsOff),
		say(`releases its term of "([^"]*)" without waiting: the term has ended when the call returns, and the backend's answer is no error`, w.releasesAsync),
		say(`holds a permit of the semaphore "([^"]*)" of (\d+)`, w.holdsPermit),
		say(`(makes one attempt at|acquires) a permit of the semaphore "([^"]*)" of (\d+), which fails (?:at once )?with (\w+)`, w.permitFails),
		say(`begins to acquire a permit of the semaphore "([^"]*)" of (\d+) within (.+)`, w.beginsToAcquirePermit),
		say(`releases its permit of "([^"]*)"`, w.releasesPermit),
		timed(`got a permit of "([^"]*)", with a token above every earlier permit's(?:, once ([A-Z])'s were no longer valid)?`, w.gotPermit),
		say(`holds? (\d+) valid permits? of "([^"]*)" between them`, w.validPermits),
		say(`writes "([^"]*)" to each fenced value with its term of "([^"]*)", which is (accepted|refused)`, w.fencedWrite),
		say(`writes "([^"]*)" in a transaction of its term of "([^"]*)", which (commits|writes nothing)`, w.inTermWrite),
		say(`keeps a transaction of its term of "([^"]*)" open while a write of the backend's record of "([^"]*)" waits for it, then commits`, w.inTermHoldsRecord),

		say(`sees that ([A-Z]) holds "([^"]*)", with its identity, its session and the token of its term`, w.seesHolder),
		say(`sees that nobody holds "([^"]*)"`, w.seesNobody),
		say(`observes the holder of "([^"]*)"`, w.observesHolder),
		timed(`has observed that (nobody|[A-Z]) holds? "([^"]*)"`, w.hasObserved),
		say(`observed the holders of "([^"]*)" in this order: (.+)`, w.observedInOrder),
		say(`closed its session after releasing "([^"]*)", before its fx app's stop returned`, w.closedAfterRelease),
	})

	// A node's terms: steps_terms_test.go
	step(withinGroup+`([A-Z])'s ((?:term|terms|first term|two terms|new term) .+)$`, phrases{
		timed(`term of "([^"]*)" ends with (\w+)`, w.termEnds),
		say(`terms? of (.+) ended with (\w+)`, w.termsEnded),
		say(`term of "([^"]*)" ended with (\w+) (.+) after its last successful keep-alive`, w.termEndedAfterSuccess),
		say(`term of "([^"]*)" ended when the first keep-alive sent after it was taken over got its reply`, w.endedAtKeepAlive),
		say(`term of "([^"]*)" had ended with (\w+) before ([A-Z])'s term began`, w.endedBefore),
		say(`term of "([^"]*)" is valid, with time remaining of at most (.+)`, w.termValidAtMost),
		say(`term of "([^"]*)" has as much time remaining as [A-Z]'s session`, w.termAsSession),
		say(`term of "([^"]*)" is not valid and has no time remaining`, w.termInvalid),
		say(`term of "([^"]*)" is still valid`, w.termStillValid),
		say(`term of "([^"]*)" loses exactly (.+) of its time remaining, as that much time passes`, w.termLost),
		say(`term of "([^"]*)" has not been revoked yet`, w.termNotRevoked),
		say(`term of "([^"]*)" belongs to ([A-Z])'s second session`, w.termInSecondSession),
		say(`first term of "([^"]*)" is still not valid`, w.firstTermInvalid),
		say(`first term of "([^"]*)" has ended and its second is valid`, w.firstEndedSecondValid),
		say(`two terms of "([^"]*)" are different, with different tokens`, w.twoTermsDiffer),
		say(`new term of "([^"]*)" was won no sooner than (.+) after its step-down`, w.wonNoSooner),
	})
	step(`^EnsureValid of ([A-Z])'s (first )?term of "([^"]*)" (succeeds|fails with \w+) for (.+)$`, w.ensureValid)
	step(`^asked for exactly the time ([A-Z])'s term of "([^"]*)" has left, EnsureValid fails with ErrTermExpired, and asked for 1ns less it succeeds$`, w.ensureValidExact)
	step(`^the terms of "([^"]*)", in the order they were won by ([A-Z]) and ([A-Z]), have tokens above zero and strictly increasing$`, w.tokensIncrease)

	// A node's listeners, callbacks and leader work: steps_callbacks,
	// _handover, _terms, _events, _locks, _work.
	step(withinGroup+`([A-Z])'s ((?:listener|event listener|stuck listener|callbacks|handover|stop|stop or step-down|work|leader work call|runs|start of the election|election, lock and one-shot lock attempt) .+[^:])$`, phrases{
		say(`listener for "([^"]*)" was given (\d+) different terms?`, w.listenerGiven),
		say(`listener for "([^"]*)" was told (\w+) exactly once for its term, and [A-Z] published one Revoked event for it`, w.toldOnce),
		say(`listener for "([^"]*)" was still told exactly once about its term`, w.stillToldOnce),
		say(`listener for "([^"]*)" was never called`, w.listenerNeverCalled),
		say(`listener for "([^"]*)" is never told about the term it won on the backend`, w.neverTold),
		say(`listener for "([^"]*)" takes (.+) to handle a revocation`, w.slowRevocation),
		say(`listener for "([^"]*)" takes (.+) per callback, and calls into the client from each`, w.slowCallbacks),
		say(`listener for "([^"]*)", once elected, will (.+)`, w.actionOnElected),
		say(`listener got, right after the event it was stuck on, an EventDropped counting at least (\d+) events, every drop the client counted`, w.droppedRightAfterFirst),
		say(`stuck listener goes on`, w.unblockStuck),
		timed(`(?:listener|work) made the call it was given, and the call returned within (.+)`, w.madeCallReturned),
		timed(`event listener closed the client, and the close returned within (.+)`, w.eventCloseReturned),
		say(`callbacks for "([^"]*)" pair up: each OnElected followed by one OnRevoked of the same term`, w.callbacksPair),
		say(`callbacks for "([^"]*)" never overlapped`, w.neverOverlapped),
		say(`handover of "([^"]*)" went in this order: term revoked, lease released with its token, listener told (\w+), call returned`, w.handoverOrder),
		say(`handover of "([^"]*)" went in this order: term revoked, work interrupted, work exited, lease released with its token, call returned`, w.workHandoverOrder),
		say(`stop returns once the listener is done`, w.stopReturnsAfterListener),
		say(`stop or step-down of "([^"]*)" returned after its listener finished handling the revocation`, w.returnedAfterRevocation),
		say(`stop returned only after its acquire in flight of "([^"]*)" was answered and what it won was released`, w.stopReturnedAfterAttempt),
		say(`work on "([^"]*)" was interrupted when the term ended, and was still running`, w.workInterruptedAtEnd),
		say(`work for "([^"]*)" ran exactly once in each of its (\d+) terms, and each run's context ended when its term ended`, w.workOncePerTerm),
		timed(`leader work call for "([^"]*)" returns (nil|the work's failure)`, w.workCallReturns),
		say(`runs of "([^"]*)" started at these times after its term began: (.+)`, w.scheduleStarts),
		say(`start of the election "([^"]*)"(?: again)? fails with (\w+)`, w.startFails),
		say(`election, lock and one-shot lock attempt named (.+) are each refused with ErrInvalidName, the error quoting the name and saying "([^"]*)", and [A-Z] made no backend call about that name`, w.refusedName),
	})
	step(`^while ([A-Z])'s listener is still handling the revocation, ([A-Z])'s one attempt at the lock "([^"]*)" succeeds$`, w.takenDuringRevocation)

	// A node's session, connection, calls and snapshot: steps_sessions,
	// _nodes, _candidates, _locks, _handover, _layout, _groups, _metrics.
	step(withinGroup+`([A-Z])'s ((?:session|next|held|keep-alives|local deadline|connection|snapshot|attempt|acquisition|one attempt|call|token|metric) .+[^:])$`, phrases{
		say(`attempt gave up exactly one lease duration after it began`, w.gaveUpAfterLease),
		say(`call returned a valid term`, w.callWon),
		say(`call returned no term and an error matching (\w+), without panicking`, w.callReturned),
		timed(`session is (OPENING|LIVE|SUSPENDED|CLOSED)(, without an id|, with an id and time remaining)?`, w.sessionStatus),
		say(`next keep-alive gets its reply, and its local deadline is (.+) after it was sent and (.+) after the reply arrived`, w.nextKeepAlive),
		say(`held (keep-alive|acquire) reply (?:arrives|is released)(?:, saying the session is alive)?`, w.heldArrives),
		say(`next keep-alive fails exactly one renew interval after it was sent`, w.keepAliveGivesUp),
		say(`next (keep-alive|acquire|release) reply is held back (for .+|until released)`, w.holdReply),
		say(`next winning acquire reply for "([^"]*)" will carry the token of [A-Z]'s current term`, w.forgeToken),
		say(`keep-alives were sent (.+) apart`, w.keepAlivesApart),
		say(`local deadline passes`, w.deadlinePasses),
		say(`connection (stalls|heals)(?:, as if [A-Z] had crashed)?`, w.connection),
		timed(`snapshot shows "([^"]*)" as (\w+)`, w.snapshotState),
		say(`snapshot does not show "([^"]*)" as HOLDING, CONTENDING or COOLDOWN`, w.snapshotIdle),
		say(`snapshot shows (a shortened|an unshortened) lease, renewed every (.+)`, w.snapshotRenew),
		say(`snapshot shows the id of the session all of [A-Z]'s terms belong to`, w.snapshotSessionID),
		say(`attempt at "([^"]*)" was refused`, w.attemptRefused),
		say(`attempt at "([^"]*)" has been answered by the backend`, w.attemptAnswered),
		say(`acquisition of "([^"]*)" fails with (\w+)(?:, no sooner than (.+) after it began)?`, w.acquisitionFails),
		say(`acquisition of "([^"]*)" fails with (\w+) and (context\.\w+)`, w.acquisitionFailsBoth),
		timed(`acquisition of "([^"]*)" returns a valid term, with a higher token`, w.acquisitionReturns),
		say(`one attempt at the lock ("[^"]*"|named .+) (succeeds|fails with \w+(?: and \w+)*)`, w.oneAttempt),
		say(`one attempt at each lease "([^"]*)\.i" fails with ErrLockHeld`, w.partitionsHeld),
		say(`token of "([^"]*)" is (one above|above) ([A-Z])'s`, w.tokenAbove),
		say(`token of "([^"]*)" is the server's clock in microseconds when ([A-Z]) won it`, w.tokenFromServerClock),
		timed(`metric (simba_\w+)(\{[^}]*\})? is (\d+(?:\.\d+)?|above zero)`, w.metricIs),
	})
	// Steps with a table: steps_config, _sessions, _events, _fx.
	step(`^([A-Z])'s (.+):$`, phrases{
		say(`client uses the timing`, w.clientUses),
		say(`keep-alives after its last successful one were sent at these times after it`, w.retryTimes),
		say(`snapshot lists exactly`, w.snapshotLists),
		say(`event listener received, in this order`, w.eventsInOrder),
		say(`fx app starts with the session timing from the environment`, w.fxStartWithEnv),
	})

	// Every call the nodes made: steps_sessions_test.go
	step(`^every (.+)$`, phrases{
		say(`call ([A-Z]) and ([A-Z]) made had a deadline at most one renew interval away`, w.callsBounded),
		say(`call ([A-Z]) made after its session opened had a deadline at most (.+) away`, w.callsBoundedBy),
		say(`call of ([A-Z]) takes (.+) to reach the backend`, w.callsDelayed),
		say(`call of ([A-Z]) fails from its next successful keep-alive on`, w.failAfterKeepAlive),
		say(`HOLDING entry of ([A-Z])'s snapshot has time remaining, at most the session's`, w.leaderRemaining),
		say(`session id has the form this backend documents`, w.idForm),
		say(`term showed one token in its callbacks and its events`, w.tokensConsistent),
		say(`call into the client made from a callback returned`, w.intoClientReturned),
		say(`run of "([^"]*)" on ((?:[A-Z], )*[A-Z]) and ([A-Z]) began under a term that was valid, and no run began after its term ended`, w.runsUnderValidTerms),
	})
	step(`^after each answer ([A-Z]) waited at least half a renew interval, and less than half a renew interval plus the retry jitter, before its next attempt at "([^"]*)", and the waits were not all the same$`, w.attemptSpacing)
	step(`^the (\d+) sessions they opened all have different ids$`, w.distinctSessions)

	// The backend, its faults and what it stores: steps_nodes, _sessions,
	// _layout; faults_test.go.
	step(`^the (backend(?:'s)? .+)$`, phrases{
		say(`backend expires ([A-Z])'s session`, w.expireSession),
		say(`backend grants leases of at most (.+)`, w.maxLease),
		say(`backend refuses ([A-Z])'s first session: its keep-alives and its attempts fail with ErrSessionExpired`, w.firstSessionRefused),
		say(`backend still holds ([A-Z])'s session: its held keep-alive renewed it there`, w.backendStillHolds),
		say(`backend keeps ([A-Z])'s session as one record that expires at most one lease duration from the server's clock`, w.sessionRecord),
		say(`backend's record of "([^"]*)" names ([A-Z])'s session and token(, and never expires)?`, w.leaseRecord),
		say(`backend still keeps the record of "([^"]*)", naming no session, with ([A-Z])'s token`, w.releasedRecord),
		say(`backend's record of "([^"]*)" is changed by hand to another token`, w.recordRetokened),
	})
	step(`^a subscriber listens on the backend's release channel$`, w.subscribeReleases)
	step(`^the subscriber heard the release of "([^"]*)", addressed to the node that waits for it$`, w.heardRelease)

	// Sessions opened directly on the backend: steps_sessions_test.go,
	// faults_test.go.
	step(`^another session takes "([^"]*)" over$`, w.takeOver)
	step(`^the session that took "([^"]*)" over expires$`, w.phantomExpires)
	step(`^session ([a-z]) (.+)$`, phrases{
		say(`is opened directly on the backend(?:, with a lease of (.+))?`, w.rawOpened),
		say(`wins (.+)`, w.rawWins),
		say(`releases its term (\d+) of "([^"]*)"`, w.rawReleases),
		say(`cannot win "([^"]*)"`, w.rawCannotWin),
	})
	step(`^session ([a-z])'s (.+)$`, phrases{
		say(`keep-alive fails with (\w+)`, w.rawKeepAliveFails),
		say(`attempt at "([^"]*)" fails with (\w+)`, w.rawAcquireFails),
	})

	// Configuration: steps_config_test.go
	step(`^config "([^"]*)" (.+[^:])$`, phrases{
		say(`is an empty config with its defaults filled in`, w.defaultsFilled),
		say(`is accepted`, w.configAccepted),
		say(`is refused because of (\w+)`, w.configRefused),
		say(`is refused because of (\w+), the error naming it and the value "([^"]*)"`, w.configRefusedNaming),
	})
	step(`^config "([^"]*)" (.+):$`, phrases{
		say(`sets`, w.configWith),
		say(`is derived from config "([^"]*)" with`, w.deriveVariant),
		say(`(?:still )?has`, w.configHas),
	})
	step(`^the timing:$`, w.setTiming)

	// Direct calls: steps_locks_test.go
	step(`^releasing ([A-Z])'s term of "([^"]*)" again, then closing it, returns no error and sends nothing to the backend$`, w.releaseAgain)
	step(`^stopping the election "([^"]*)" on ([A-Z]) again fails with (\w+)$`, w.stopAgainFails)

	// Elections seen from outside: steps_elections_test.go
	step(`^the leader of "([^"]*)" steps down for (.+), (\d+) times$`, w.leaderStepsDown)
	step(`^"([^"]*)" has a leader again within (.+)$`, w.hasLeader)

	// Groups: steps_groups_test.go
	step(withinGroup+`the partitions of "([^"]*)" are spread over ((?:[A-Z], )*[A-Z](?: and [A-Z])?), each holding within one of an even share$`, w.spread)
	step(`^no partition of "([^"]*)" ever ran under two terms at once, each term ending before the next higher token began$`, w.partitionsExclusive)
	step(`^partition i of "([^"]*)" is always the lease "([^"]*)"$`, w.partitionLeases)

	// Fencing: steps_fencing_test.go
	step(`^the fenced values kept (.+)$`, w.fencedValues)
	step(`^each fenced value holds "([^"]*)" with ([A-Z])'s token of "([^"]*)"$`, w.fencedHolds)
	step(`^the transactions in a term wrote (nothing|".+")$`, w.transactionsWrote)
	step(`^the fencing kit (.+)$`, phrases{
		say(`passes the recipe kept (in process|in Redis|in a SQL table)`, w.kitPasses),
		say(`fails a resource that ignores tokens, naming exactly the checks (.+)`, w.kitFailsIgnorer),
	})

	// fx applications: steps_fx_test.go
	step(`^([A-Z])'s ((?:fx app|start hook) .+[^:])$`, phrases{
		say(`fx app runs leader work for "([^"]*)" that,? (.+)`, w.fxLeaderWork),
		say(`fx app schedules "([^"]*)" every (\S+)`, w.fxSchedules),
		say(`fx app runs the group "([^"]*)" of (\d+) partitions`, w.fxGroup),
		say(`fx app has an event listener that panics on every event`, w.fxPanickingListener),
		say(`fx app failed to start, with an error naming (\S+) and saying "([^"]*)"`, w.fxFailed),
		say(`fx app takes the lock "([^"]*)" (in an invocation|in a start hook)`, w.fxTakesLock),
		say(`start hook holds its lock`, w.fxHookHolds),
	})
	step(`^the fx apps? of ((?:[A-Z], )*[A-Z](?: and [A-Z])?) (is built|are built|starts|start)$`, w.fxStart)
	step(`^the fx app of ([A-Z]) stops$`, w.fxStop)
	step(`^building ([A-Z])'s fx app fails at once with an error matching (\w+)$`, w.fxBuildFails)

	// The simba command: steps_cli_test.go
	step(withinGroup+`simba (\d)(.+)$`, phrases{
		say(" runs `([^`]*)`(?:, with `([^`]*)` in its environment)?", w.simbaRuns),
		timed(` exits with code (\d+)`, w.simbaExits),
		timed("'s (output|stderr) has (no )?`([^`]*)`", w.simbaPrinted),
		say(` gets (SIG[A-Z]+)`, w.simbaSignalled),
	})
	step(withinGroup+`the tokens printed by the commands of simba (\d)(?: and then simba (\d))? increase$`, w.printedTokensRise)
}
