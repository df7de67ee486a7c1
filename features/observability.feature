@observability
Feature: Observability
  A client shows its session and every election and lock of the node in a
  snapshot, and reports what happens to them as events.

  @R-OBS-1
  Scenario: The snapshot shows the session and every election and lock of the node
    Given nodes A and B are connected
    And A is leader of "report"
    And B is leader of "billing"
    And A starts the election "billing"
    And A holds the lock "invoice"
    And A is leader of "audit"
    And A steps down from "audit" for 10 lease durations
    Then A's session is LIVE, with an id and time remaining
    And A's snapshot shows the id of the session all of A's terms belong to
    And A's snapshot lists exactly:
      | name    | kind     | state      | token           |
      | audit   | election | COOLDOWN   | none            |
      | billing | election | CONTENDING | none            |
      | invoice | lock     | HOLDING    | its term's      |
      | report  | election | HOLDING    | its term's      |
    And every HOLDING entry of A's snapshot has time remaining, at most the session's

  @R-OBS-2
  Scenario: A listener that falls behind loses the oldest events, and is told so before the events it kept
    Given node A joins with its only event listener stuck on its first event and a buffer of 4 events
    When A takes and releases the lock "invoice" 10 times
    And A's stuck listener goes on
    Then A's listener got, right after the event it was stuck on, an EventDropped counting at least 16 events, every drop the client counted

  @R-OBS-2
  Scenario: Registered listeners receive the session and term events
    Given node A is connected
    And A is leader of "report"
    When A stops the election "report"
    And A closes
    Then A's event listener received, in this order:
      | SessionOpened |                 |
      | Elected       | report          |
      | Revoked       | report STOPPED  |
      | SessionClosed |                 |

  @R-OBS-2 @memory
  Scenario: Registered listeners hear about trouble with the session
    Given the timing:
      | LeaseDuration | 9s |
      | RenewInterval | 3s |
    And the backend grants leases of at most 3s
    And node A is connected
    And A is leader of "report"
    When A's connection stalls
    And within two renew intervals A's session is SUSPENDED
    And A's connection heals
    And within one renew interval A's session is LIVE, with an id and time remaining
    And the backend expires A's session
    And within one lease duration A is leader of "report" again, with a higher token
    And A's connection stalls
    And within one lease duration A's term of "report" ends with DEADLINE_PASSED
    And A's connection heals
    And within one lease duration A is leader of "report" again, with a higher token
    Then A's event listener received, in this order:
      | SessionLeaseShortened |                        |
      | SessionOpened         |                        |
      | Elected               | report                 |
      | SessionSuspended      |                        |
      | SessionRestored       |                        |
      | Revoked               | report SESSION_EXPIRED |
      | SessionExpired        |                        |
      | SessionLeaseShortened |                        |
      | SessionOpened         |                        |
      | Elected               | report                 |
      | Revoked               | report DEADLINE_PASSED |
      | SessionDeadlinePassed |                        |
      | SessionOpened         |                        |
      | Elected               | report                 |
