@handover
Feature: Handover
  Stopping or stepping down gives the lease up in a fixed order: the term is
  revoked first, then the lease is released with the term's token, then the
  listener hears of it, and only then does the call return. A term lost any
  other way is revoked at once, without waiting for anybody.

  @R-HO-1
  Scenario Outline: Stop and step-down give the lease up in order
    Given node A is connected
    And A is leader of "report"
    And A's listener for "report" takes 300ms to handle a revocation
    When <action>
    Then A's handover of "report" went in this order: term revoked, lease released with its token, listener told <reason>, call returned

    Examples:
      | action                                            | reason       |
      | A stops the election "report"                     | STOPPED      |
      | A steps down from "report" for one lease duration | STEPPED_DOWN |

  @R-HO-1
  Scenario Outline: Stop and step-down wait for the leader work to exit before releasing the lease
    Given node A is connected
    And A runs leader work for "report" that takes 300ms to exit once interrupted
    And within one lease duration A is leader of "report"
    When <action>
    Then A's handover of "report" went in this order: term revoked, work interrupted, work exited, lease released with its token, call returned

    Examples:
      | action                                            |
      | A stops the election "report"                     |
      | A steps down from "report" for one lease duration |

  @R-HO-1
  Scenario: Work that ignores the interruption holds the lease only until the term's deadline at the stop
    Given node A is connected
    And A runs leader work for "report" that ignores interruption for 10s
    And within one lease duration A is leader of "report"
    When A stops the election "report"
    Then A released "report" at the local deadline its term had at its stop, while the work was still running

  @R-HO-1 @R-CAND-5
  Scenario: A stop while an acquire is in flight returns once what that acquire won was released
    Given nodes A and B are connected
    And every call of A takes 300ms to reach the backend
    When A starts the election "report"
    And A stops the election "report" while its acquire is in flight
    Then A's stop returned only after its acquire in flight of "report" was answered and what it won was released
    And B's one attempt at the lock "report" succeeds

  @R-HO-2
  Scenario: A term without work releases its lease at once
    Given nodes A and B are connected
    And A is leader of "report"
    And A's listener for "report" takes one lease duration to handle a revocation
    When A begins to stop the election "report"
    Then while A's listener is still handling the revocation, B's one attempt at the lock "report" succeeds
    And A's stop returns once the listener is done

  @R-HO-3
  Scenario Outline: A term lost without a stop is not waited for
    Given node A is connected
    And A runs leader work for "report" that ignores interruption for 10s
    And within one lease duration A is leader of "report"
    When <fault>
    Then within one lease duration A's term of "report" ends with <reason>
    And A's work on "report" was interrupted when the term ended, and was still running
    And A sent no release for its term of "report"

    Examples:
      | fault                               | reason          |
      | A's connection stalls               | DEADLINE_PASSED |
      | the backend expires A's session     | SESSION_EXPIRED |
      | another session takes "report" over | TAKEN_OVER      |

  @R-HO-4
  Scenario: Stepping down keeps the election, but it does not contend during the cooldown
    Given node A is connected
    And A is leader of "report"
    When A steps down from "report" for 3 renew intervals
    Then A's snapshot shows "report" as COOLDOWN
    And A makes no attempt at "report" until 3 renew intervals after its step-down
    And within one lease duration A is leader of "report" again, with a higher token
    And A's new term of "report" was won no sooner than 3 renew intervals after its step-down

  @R-HO-4
  Scenario: Stopping ends the election
    Given node A is connected
    And A is leader of "report"
    When A stops the election "report"
    Then A makes no attempt at "report" during one lease duration
    And A's snapshot does not show "report" as HOLDING, CONTENDING or COOLDOWN
    And stopping the election "report" on A again fails with ErrNotStarted
