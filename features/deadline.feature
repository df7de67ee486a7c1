@deadline
Feature: The local deadline
  The client never compares its clock with the backend's. Each keep-alive
  reply says how long the session has left, measured by the backend; the
  client turns it into a deadline on its own monotonic clock, counted from
  when the keep-alive was sent:

    deadline = sentAt + remaining × (1 − drift) − margin

  A term is valid until that deadline. On the memory backend these scenarios
  run on a fake clock, so the times below are exact (to the millisecond).

  @R-DL-1
  Scenario Outline: The deadline counts from when the keep-alive was sent
    Given the timing:
      | LeaseDuration | 5s       |
      | RenewInterval | 1s       |
      | Drift         | <drift>  |
      | Margin        | <margin> |
    And node A is connected and its session is live
    And every call of A takes 300ms to reach the backend
    Then A's next keep-alive gets its reply, and its local deadline is <validity> after it was sent and <left> after the reply arrived

    Examples:
      | drift | margin | validity | left  |
      | 0.01  | 50ms   | 4.9s     | 4.6s  |
      | 0.1   | none   | 4.5s     | 4.2s  |
      | none  | 1s     | 4s       | 3.7s  |

  @R-DL-2
  Scenario: Every backend call is bounded by the renew interval
    Given nodes A and B are connected
    And A is leader of "report"
    And A holds the lock "invoice"
    And B starts the election "report"
    When 2 renew intervals pass
    And A stops the election "report"
    And A releases the lock "invoice"
    And within one lease duration B is leader of "report"
    And A and B close
    Then A and B made calls of every kind: OpenSession, KeepAlive, Acquire, Release and CloseSession
    And every call A and B made had a deadline at most one renew interval away

  @R-DL-2
  Scenario: A keep-alive to a stalled backend gives up after one renew interval
    Given node A is connected and its session is live
    When A's connection stalls
    Then A's next keep-alive fails exactly one renew interval after it was sent

  @R-DL-2
  Scenario: Under a shortened lease, calls are bounded by the shortened renew period
    Given the timing:
      | LeaseDuration | 3s |
      | RenewInterval | 1s |
    And the backend grants leases of at most 1s
    And node A is connected and its session is live
    And A is leader of "report"
    When 3 renew intervals pass
    And A stops the election "report"
    And A closes
    Then every call A made after its session opened had a deadline at most 313.333ms away

  @R-DL-3
  Scenario: A keep-alive reply that arrives after the deadline does not extend it
    Given node A is connected
    And A is leader of "report"
    And A's next keep-alive reply is held back for one lease duration
    When A's local deadline passes
    Then the backend still holds A's session: its held keep-alive renewed it there
    When A's held keep-alive reply arrives, saying the session is alive
    Then A's term of "report" ended with DEADLINE_PASSED
    And A's term of "report" is not valid and has no time remaining
    And within one lease duration A is leader of "report" again, with a higher token
    And A's term of "report" belongs to A's second session
    And A's first term of "report" is still not valid

  @R-DL-4
  Scenario: After a failed keep-alive the client retries with halving backoff until the deadline
    Given the timing:
      | LeaseDuration | 4s    |
      | RenewInterval | 1s    |
      | Drift         | none  |
      | Margin        | none  |
      | MinBackoff    | 32ms  |
    And node A is connected
    And A is leader of "report"
    When every call of A fails from its next successful keep-alive on
    Then A's keep-alives after its last successful one were sent at these times after it:
      | 1s | 2s | 3s | 3.5s | 3.75s | 3.875s | 3.9375s | 3.9695s |
    And A's term of "report" ended with DEADLINE_PASSED 4s after its last successful keep-alive

  @R-DL-5
  Scenario: A backend granting less than asked makes the client renew every third of the grant
    Given the timing:
      | LeaseDuration | 3s |
      | RenewInterval | 1s |
    And the backend grants leases of at most 1s
    And node A is connected
    And A is leader of "report"
    When 4s pass
    Then A's term of "report" is still valid
    And A's snapshot shows a shortened lease, renewed every 313.333ms
    And A's keep-alives were sent 313.333ms apart
    And A published one SessionLeaseShortened event, for a grant of 1s
    And A logged exactly one warning about the shortened lease
    When the backend expires A's session
    Then within one lease duration A is leader of "report" again, with a higher token
    And A published two SessionLeaseShortened events, one per session

  @R-DL-5
  Scenario: A grant that still fits two keep-alives changes nothing
    Given the timing:
      | LeaseDuration | 3s |
      | RenewInterval | 1s |
    And the backend grants leases of at most 2.7s
    And node A is connected
    And A is leader of "report"
    When 4s pass
    Then A's term of "report" is still valid
    And A's snapshot shows an unshortened lease, renewed every 1s
    And A published no SessionLeaseShortened events
