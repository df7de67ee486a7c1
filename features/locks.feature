@locks
Feature: Locks
  A lock holds a lease around one step: it takes the first term it wins and
  gives it back when released. Acquire waits until its context's deadline;
  TryAcquire makes one attempt.

  @R-LOCK-1
  Scenario: Acquire waits up to its timeout, then fails with ErrLockTimeout
    Given nodes A and B are connected
    And A holds the lock "invoice"
    When B acquires the lock "invoice" within 2 renew intervals
    Then B's acquisition of "invoice" fails with ErrLockTimeout, no sooner than 2 renew intervals after it began

  @R-LOCK-1
  Scenario: Acquire gets the lock when it is released within the timeout
    Given nodes A and B are connected
    And A holds the lock "invoice"
    When B begins to acquire the lock "invoice" within 3 lease durations
    And A releases the lock "invoice"
    Then within one lease duration B's acquisition of "invoice" returns a valid term, with a higher token

  @R-LOCK-1
  Scenario: A session that ends while Acquire waits does not end the wait
    Given nodes A and B are connected
    And A holds the lock "invoice"
    When B begins to acquire the lock "invoice" within 5 lease durations
    And the backend expires B's session
    And A releases the lock "invoice"
    Then within one lease duration B's acquisition of "invoice" returns a valid term, with a higher token
    And B's term of "invoice" belongs to B's second session

  @R-LOCK-2
  Scenario: Cancelling an acquisition releases the term its attempt won
    Given nodes A and B are connected
    And A's next acquire reply is held back for one renew interval
    When A begins to acquire the lock "invoice" within one lease duration
    And A's attempt at "invoice" has been answered by the backend
    And A cancels its acquisition of "invoice"
    Then A's acquisition of "invoice" fails with ErrLockTimeout and context.Canceled
    When A's held acquire reply arrives
    Then within one renew interval A released the term its held acquire reply won
    And B's one attempt at the lock "invoice" succeeds

  @R-LOCK-3
  Scenario: TryAcquire makes one attempt, and none when this client holds the lock
    Given nodes A and B are connected
    When A's one attempt at the lock "invoice" succeeds
    Then B's one attempt at the lock "invoice" fails with ErrLockHeld
    And B made exactly 1 attempt at "invoice"
    And A's one attempt at the lock "invoice" fails with ErrLockHeld
    And A made exactly 1 attempt at "invoice"

  @R-LOCK-3
  Scenario: TryAcquire gives up when no attempt is answered within one lease duration, and says the backend is unavailable
    Given node A is connected and its session is live
    And A's connection stalls
    When A's one attempt at the lock "invoice" fails with ErrLockTimeout and ErrBackendUnavailable
    Then A's attempt gave up exactly one lease duration after it began

  @R-LOCK-4
  Scenario Outline: Acquire and TryAcquire return a term or an error, never a panic
    Given node A is connected
    When A calls <method> on the lock <name> with <context>
    Then A's call returned no term and an error matching <error>, without panicking

    Examples:
      | method     | name        | context            | error              |
      | Acquire    | "invoice"   | a nil context      | ErrInvalidArgument |
      | TryAcquire | "invoice"   | a nil context      | ErrInvalidArgument |
      | Acquire    | "invoice"   | a cancelled context| ErrLockTimeout     |
      | Acquire    | "bad name"  | a live context     | ErrInvalidName     |
      | TryAcquire | "bad/name"  | a live context     | ErrInvalidName     |

  @R-LOCK-1 @R-LOCK-3
  Scenario Outline: <method> whose deadline has already passed makes one attempt, and fails when the lock is held
    Given node A is connected
    And node B is connected
    And A holds the lock "invoice"
    When B calls <method> on the lock "invoice" with an expired context
    Then B's call returned no term and an error matching <error>, without panicking
    And B made exactly 1 attempt at "invoice"

    Examples:
      | method     | error          |
      | Acquire    | ErrLockTimeout |
      | TryAcquire | ErrLockHeld    |

  @R-LOCK-1 @R-LOCK-3
  Scenario Outline: <method> with a timeout of 0 wins a free lock with its one attempt
    Given node A is connected and its session is live
    When A calls <method> on the lock "invoice" with a timeout of 0
    Then A's call returned a valid term
    And A made exactly 1 attempt at "invoice"

    Examples:
      | method     |
      | Acquire    |
      | TryAcquire |

  @R-LOCK-4
  Scenario Outline: Acquire and TryAcquire on a closed client return ErrClosed
    Given node A is connected
    And A closes
    When A calls <method> on the lock "invoice" with a live context
    Then A's call returned no term and an error matching ErrClosed, without panicking

    Examples:
      | method     |
      | Acquire    |
      | TryAcquire |

  @R-LOCK-4
  Scenario: An acquisition waiting when the client closes returns ErrClosed
    Given nodes A and B are connected
    And B holds the lock "invoice"
    When A begins to acquire the lock "invoice" within 5 lease durations
    And A closes
    Then A's acquisition of "invoice" fails with ErrClosed

  @R-LOCK-5
  Scenario: Within one client a name has at most one holder
    Given node A is connected
    And A holds the lock "invoice"
    When A acquires the lock "invoice" within 2 renew intervals
    Then A's acquisition of "invoice" fails with ErrLockTimeout, no sooner than 2 renew intervals after it began
    When A begins to acquire the lock "invoice" within 3 lease durations
    And A releases the lock "invoice"
    Then within one lease duration A's acquisition of "invoice" returns a valid term, with a higher token

  @R-LOCK-6
  Scenario: A lock term can be released on another goroutine, and releasing it again does nothing
    Given nodes A and B are connected
    And A holds the lock "invoice"
    When A hands its term of "invoice" to another goroutine, which releases it without error
    And releasing A's term of "invoice" again, then closing it, returns no error and sends nothing to the backend
    And B's one attempt at the lock "invoice" succeeds

  @R-LOCK-6 @R-TERM-7
  Scenario: A release that does not wait ends the term at once and frees the lease
    Given nodes A and B are connected
    And A holds the lock "invoice"
    When A releases its term of "invoice" without waiting: the term has ended when the call returns, and the backend's answer is no error
    Then B's one attempt at the lock "invoice" succeeds
    And releasing A's term of "invoice" again, then closing it, returns no error and sends nothing to the backend

  @R-LOCK-6
  Scenario: Releasing a lock term that already ended is a no-op
    Given node A is connected
    And A holds the lock "invoice"
    When another session takes "invoice" over
    Then within one lease duration A's term of "invoice" ends with TAKEN_OVER
    And releasing A's term of "invoice" again, then closing it, returns no error and sends nothing to the backend

  @R-LOCK-7
  Scenario Outline: A lock lost early is released for good, never re-acquired behind the holder's back
    Given node A is connected
    And A holds the lock "invoice"
    When <fault>
    Then within one lease duration A's term of "invoice" ends with <reason>
    And EnsureValid of A's term of "invoice" fails with ErrTermExpired for 0s
    When A's connection heals
    And the session that took "invoice" over expires
    Then A makes no attempt at "invoice" during one lease duration
    And A's snapshot does not show "invoice" as HOLDING, CONTENDING or COOLDOWN
    And releasing A's term of "invoice" again, then closing it, returns no error and sends nothing to the backend

    Examples:
      | fault                                | reason          |
      | another session takes "invoice" over | TAKEN_OVER      |
      | the backend expires A's session      | SESSION_EXPIRED |
      | A's connection stalls                | DEADLINE_PASSED |

  @R-LOCK-8
  Scenario: One client cannot use a name for a lock and an election at once
    Given node A is connected
    And A is leader of "report"
    Then A's one attempt at the lock "report" fails with ErrNameInUse
    When A holds the lock "invoice"
    Then A's start of the election "invoice" fails with ErrNameInUse

  @R-LOCK-8
  Scenario: A lock and an election of the same name share one lease
    Given nodes A and B are connected
    And A holds the lock "report"
    When B starts the election "report"
    Then B is not leader of "report" during 2 renew intervals
    When A releases the lock "report"
    Then within one lease duration B is leader of "report", with a higher token than A's lock term
