@terms
Feature: Terms and fencing tokens
  A term is one period during which a node owns a lease. It carries a fencing
  token, knows whether it is still valid and how much time it has left, and
  ends exactly once, with a reason.

  @R-TERM-1
  Scenario: Winning the same election twice gives two terms
    Given node A is connected
    And A is leader of "report"
    When A steps down from "report" for no time
    Then within one lease duration A is leader of "report" again, with a higher token
    And A's listener for "report" was given 2 different terms
    And A's first term of "report" has ended and its second is valid

  @R-TERM-1
  Scenario: Acquiring the same lock twice gives two lock terms
    Given node A is connected
    And A holds the lock "invoice"
    When A releases the lock "invoice"
    And A acquires the lock "invoice" within one lease duration
    Then A's two terms of "invoice" are different, with different tokens
    And A's first term of "invoice" has ended and its second is valid

  @R-TERM-2
  Scenario: Tokens are above zero, fixed within a term and increasing from term to term
    Given nodes A and B are connected
    And A is leader of "report"
    And B starts the election "report"
    When A stops the election "report"
    Then within one lease duration B is leader of "report"
    When A starts the election "report"
    And B stops the election "report"
    Then within one lease duration A is leader of "report" again
    When A stops the election "report"
    And B holds the lock "report"
    Then the terms of "report", in the order they were won by A and B, have tokens above zero and strictly increasing
    And every term showed one token in its callbacks and its events

  @R-TERM-3
  Scenario: A live term is valid and shows the time left to its deadline
    Given node A is connected
    And A is leader of "report"
    Then A's term of "report" is valid, with time remaining of at most one lease duration
    And A's term of "report" has as much time remaining as A's session
    When A stops the election "report"
    Then A's term of "report" is not valid and has no time remaining

  @R-TERM-3 @memory
  Scenario: Validity is read from the clock: it turns false at the deadline even while the engine is stuck
    Given node A is connected
    And A is leader of "report"
    And A's next keep-alive reply is held back until released
    Then A's term of "report" loses exactly 300ms of its time remaining, as that much time passes
    When A's local deadline passes
    Then A's term of "report" is not valid and has no time remaining
    But A's term of "report" has not been revoked yet
    When A's held keep-alive reply is released
    Then within one renew interval A's term of "report" ends with DEADLINE_PASSED

  @R-TERM-4
  Scenario: An ended term never becomes valid again, even when the node is re-elected
    Given node A is connected
    And A is leader of "report"
    When A steps down from "report" for no time
    Then within one lease duration A is leader of "report" again, with a higher token
    And A's first term of "report" is still not valid
    And EnsureValid of A's first term of "report" fails with ErrTermExpired for 0s

  @R-TERM-4
  Scenario: A term ended by the deadline stays ended after the session comes back
    Given node A is connected
    And A is leader of "report"
    When A's connection stalls
    Then within one lease duration A's term of "report" ends with DEADLINE_PASSED
    When A's connection heals
    Then within one lease duration A is leader of "report" again, with a higher token
    And A's first term of "report" is still not valid

  @R-TERM-5
  Scenario: EnsureValid fails unless the term stays valid for longer than asked
    Given node A is connected
    And A is leader of "report"
    Then EnsureValid of A's term of "report" succeeds for 0s
    And EnsureValid of A's term of "report" fails with ErrTermExpired for one lease duration
    When A stops the election "report"
    Then EnsureValid of A's term of "report" fails with ErrTermExpired for 0s

  @R-TERM-5 @memory
  Scenario: EnsureValid succeeds for anything less than the exact time remaining
    Given node A is connected
    And A is leader of "report"
    Then asked for exactly the time A's term of "report" has left, EnsureValid fails with ErrTermExpired, and asked for 1ns less it succeeds

  @R-TERM-6
  Scenario Outline: A term ends exactly once, with the reason that ended it
    Given node A is connected
    And A is leader of "report"
    When <action>
    Then within one lease duration A's term of "report" ends with <reason>
    And A's listener for "report" was told <reason> exactly once for its term, and A published one Revoked event for it
    When A closes
    Then A's listener for "report" was still told exactly once about its term

    Examples:
      | action                                            | reason       |
      | A stops the election "report"                     | STOPPED      |
      | A steps down from "report" for one lease duration | STEPPED_DOWN |
      | A closes                                          | STOPPED      |

  @R-TERM-6
  Scenario Outline: A term lost to a fault ends exactly once, with the reason
    Given node A is connected
    And A is leader of "report"
    When <fault>
    Then within one lease duration A's term of "report" ends with <reason>
    And A's listener for "report" was told <reason> exactly once for its term, and A published one Revoked event for it
    When A closes
    Then A's listener for "report" was still told exactly once about its term

    Examples:
      | fault                               | reason          |
      | A's connection stalls               | DEADLINE_PASSED |
      | the backend expires A's session     | SESSION_EXPIRED |
      | another session takes "report" over | TAKEN_OVER      |

  @R-TERM-7
  Scenario: A term is revoked before its lease is released
    Given node A is connected
    And A is leader of "report"
    And A holds the lock "invoice"
    When A stops the election "report"
    And A releases the lock "invoice"
    Then A released "report" and "invoice", each with the token of its term, once the term had been revoked

  @R-TERM-7
  Scenario: A late release cannot free a later term
    Given session s is opened directly on the backend
    And session s wins "report"
    And session s releases its term 1 of "report"
    And session s wins "report"
    When session s releases its term 1 of "report"
    Then session t is opened directly on the backend
    And session t cannot win "report"

  @R-TERM-8
  Scenario: A keep-alive reply that no longer lists the lease revokes the term
    Given node A is connected
    And A is leader of "report"
    When another session takes "report" over
    Then within one lease duration A's term of "report" ends with TAKEN_OVER
    And A's term of "report" ended when the first keep-alive sent after it was taken over got its reply
