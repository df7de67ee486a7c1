@sessions
Feature: Sessions
  Liveness belongs to the node, not to each lease: a client opens one session
  on the backend and renews it with one keep-alive per renew interval, however
  many leases it holds. Every lease of the node lives and dies with that
  session.

  @R-SES-1
  Scenario: One keep-alive per renew interval, whatever the number of leases
    Given nodes A and B are connected
    And A is leader of 5 elections and holds 5 locks
    Then A and B each send 6 keep-alives, give or take one, in the next 6 renew intervals
    And A opened exactly one session, which all of its terms belong to

  @R-SES-2
  Scenario: Session ids are never reused
    Given nodes A, B and C are connected
    When each of A, B and C closes and connects again, 3 times
    Then the 12 sessions they opened all have different ids
    And every session id has the form this backend documents

  @R-SES-3
  Scenario: The backend refuses an expired session for ever
    Given session s is opened directly on the backend, with a lease of 1s
    When 2500ms pass
    Then session s's keep-alive fails with ErrSessionExpired
    And session s's attempt at "report" fails with ErrSessionExpired
    And session s's keep-alive fails with ErrSessionExpired

  # On Zookeeper the client hears of the expiry when its connection is
  # refused, which may take longer than one renew interval.
  @R-SES-3 @memory @redis @postgres @mysql
  Scenario: A client whose session expired opens a new one and contends again
    Given node A is connected
    And A is leader of "report"
    When the backend expires A's session
    Then within one renew interval A's term of "report" ends with SESSION_EXPIRED
    And within one lease duration A is leader of "report" again, with a higher token
    And A's term of "report" belongs to A's second session
    And the backend refuses A's first session: its keep-alives and its attempts fail with ErrSessionExpired

  @R-SES-4
  Scenario: Closing a client frees every lease of the node at once
    Given node A is connected
    And A is leader of "report"
    And A is leader of "billing"
    And A holds the lock "invoice"
    When A closes
    Then A's terms of "report", "billing" and "invoice" ended with STOPPED
    And session s is opened directly on the backend
    And session s wins "report", "billing" and "invoice"

  @R-SES-5
  Scenario: The snapshot shows the session going through OPENING, LIVE, SUSPENDED and CLOSED
    Given node A is connected, its connection stalled
    Then A's session is OPENING, without an id
    When A's connection heals
    Then within one lease duration A's session is LIVE, with an id and time remaining
    When A's connection stalls
    Then within two renew intervals A's session is SUSPENDED
    When A's connection heals
    Then within one lease duration A's session is LIVE, with an id and time remaining
    When A closes
    Then A's session is CLOSED
