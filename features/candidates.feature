@candidates
Feature: Candidates
  A node that wants a lease it does not hold is a candidate: it attempts to
  acquire it every half renew interval plus a random delay, at most one
  attempt at a time, and adopts a term only from a reply it can trust.

  @R-CAND-1
  Scenario: A candidate attempts every half renew interval plus a random delay
    Given nodes A and B are connected
    And A is leader of "report"
    When B starts the election "report"
    And B has made 8 attempts at "report"
    Then after each answer B waited at least half a renew interval, and less than half a renew interval plus the retry jitter, before its next attempt at "report", and the waits were not all the same

  @R-CAND-2 @broadcast
  Scenario: Where the backend broadcasts releases, a clean stop is taken over at once
    Given node A is connected
    And A is leader of "report"
    And the timing:
      | LeaseDuration | 30s |
      | RenewInterval | 10s |
    And node B is connected
    And B starts the election "report"
    And B's attempt at "report" was refused
    And B is watching for the release of "report"
    When A stops the election "report"
    Then within 1s B is leader of "report"
    And B won "report" at its first attempt after A's stop, long before its next regular attempt was due

  @R-CAND-2 @polling
  Scenario: Without release broadcasts, a clean stop is taken over at the next attempt
    Given nodes A and B are connected
    And A is leader of "report"
    And B starts the election "report"
    And B's attempt at "report" was refused
    When A stops the election "report"
    Then within one lease duration B is leader of "report"
    And B won "report" at its first attempt after A's stop, which was a regular one: at least half a renew interval after the refused attempt

  @R-CAND-3
  Scenario: At most one acquire per election is in flight
    Given nodes A and B are connected
    And A is leader of "report"
    And every call of B takes 300ms to reach the backend
    When B starts the election "report"
    And B stops and starts the election "report" again, 5 times, each time while its attempt is in flight
    And A stops the election "report"
    Then within one lease duration B is leader of "report"
    And B never had two attempts at "report" in flight at once

  @R-CAND-4 @R-CAND-5
  Scenario: The late reply to an abandoned attempt is not adopted, and what it won is released
    Given nodes A and B are connected
    And A's next acquire reply is held back for one renew interval
    When A starts the election "report"
    And A's attempt at "report" has been answered by the backend
    And A stops the election "report"
    And A's held acquire reply arrives
    Then A's listener for "report" was never called
    And within one renew interval A released the term its held acquire reply won
    And B's one attempt at the lock "report" succeeds

  @R-CAND-4
  Scenario: A reply that arrives after the local deadline is not adopted
    Given node A is connected and its session is live
    And A's next keep-alive reply is held back for one lease duration
    And A's next acquire reply is held back for one lease duration
    When A starts the election "report"
    And A's held acquire reply arrives
    Then A was never elected with the token its held acquire reply carried
    And A released the term its held acquire reply won
    When A's held keep-alive reply arrives, saying the session is alive
    Then within one lease duration A is leader of "report", with a higher token
    And A's term of "report" belongs to A's second session

  @R-CAND-4
  Scenario: A reply carrying a token this session has already released is not adopted
    Given node A is connected
    And A is leader of "report"
    And A's next winning acquire reply for "report" will carry the token of A's current term
    When A steps down from "report" for no time
    Then within one lease duration A is leader of "report" again, with a higher token
    And A's listener for "report" was given 2 different terms
