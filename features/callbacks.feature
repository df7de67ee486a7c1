@callbacks
Feature: Callbacks and lifecycle
  A listener hears of every term it wins and of how each one ended, one
  callback at a time. Callbacks never run under an engine lock, so they may
  call back into the client, even to stop or close it.

  @R-CB-1
  Scenario: Every OnElected is followed by exactly one OnRevoked of the same term
    Given nodes A and B are connected
    And A and B start the election "report"
    When the leader of "report" steps down for one renew interval, 4 times
    And "report" has a leader again within one lease duration
    Then A and B were given 5 terms of "report" between them
    When A and B close
    Then A's callbacks for "report" pair up: each OnElected followed by one OnRevoked of the same term
    And B's callbacks for "report" pair up: each OnElected followed by one OnRevoked of the same term

  @R-CB-1
  Scenario: Callbacks stay paired through take-overs, expiries and deadlines
    Given node A is connected
    And A is leader of "report"
    When another session takes "report" over
    And within one lease duration A's term of "report" ends with TAKEN_OVER
    And the session that took "report" over expires
    And within one lease duration A is leader of "report" again, with a higher token
    And the backend expires A's session
    And within one lease duration A is leader of "report" again, with a higher token
    And A's connection stalls
    And within one lease duration A's term of "report" ends with DEADLINE_PASSED
    And A's connection heals
    And within one lease duration A is leader of "report" again, with a higher token
    And A closes
    Then A's callbacks for "report" pair up: each OnElected followed by one OnRevoked of the same term
    And A's listener for "report" was given 4 different terms

  @R-CB-2
  Scenario: Callbacks of one election run one at a time, in order, with no engine lock held
    Given node A is connected
    And A's listener for "report" takes 200ms per callback, and calls into the client from each
    When A starts the election "report"
    And the leader of "report" steps down for one renew interval, 3 times
    And A stops the election "report"
    Then A's callbacks for "report" never overlapped
    And A's callbacks for "report" pair up: each OnElected followed by one OnRevoked of the same term
    And every call into the client made from a callback returned

  @R-CB-1 @R-CB-2
  Scenario: After a step-down without cooldown, the next term waits for the old term's OnRevoked
    Given node A is connected
    And A is leader of "report"
    And A's next release reply is held back for one renew interval
    When A steps down from "report" for no time
    And within one lease duration A is leader of "report" again, with a higher token
    And A stops the election "report"
    Then A's callbacks for "report" pair up: each OnElected followed by one OnRevoked of the same term

  @R-CB-3
  Scenario Outline: Stop and step-down return after the last OnRevoked ran
    Given node A is connected
    And A is leader of "report"
    And A's listener for "report" takes 300ms to handle a revocation
    When <action>
    Then A's stop or step-down of "report" returned after its listener finished handling the revocation

    Examples:
      | action                                            |
      | A stops the election "report"                     |
      | A steps down from "report" for one lease duration |

  @R-CB-3
  Scenario: After Stop returns, the listener hears nothing more
    Given nodes A and B are connected
    And A's next acquire reply is held back for one renew interval
    And A starts the election "report"
    And A's attempt at "report" has been answered by the backend
    When A stops the election "report"
    And A's held acquire reply arrives
    And B starts the election "report"
    And within one lease duration B is leader of "report"
    Then A's listener for "report" was never called

  @R-CB-4
  Scenario: Starting an election that is already started fails
    Given node A is connected
    And A starts the election "report"
    Then A's start of the election "report" again fails with ErrAlreadyStarted
    And within one lease duration A is leader of "report"
    When A stops the election "report"
    And A starts the election "report"
    Then within one lease duration A is leader of "report" again, with a higher token

  @R-CB-5
  Scenario Outline: A blocking call made from a callback does not wait for itself
    Given nodes A and B are connected
    And A holds the lock "invoice"
    And A's listener for "report", once elected, will <call>
    When A starts the election "report"
    Then within one lease duration A's listener made the call it was given, and the call returned within one renew interval
    And <effect>

    Examples:
      | call                                           | effect                                                                |
      | stop the election "report"                     | within one renew interval A's term of "report" ends with STOPPED      |
      | step down from "report" for one lease duration | within one renew interval A's term of "report" ends with STEPPED_DOWN |
      | release the lock "invoice"                     | B's one attempt at the lock "invoice" succeeds                        |

    Examples: closing the client
      | call             | effect                |
      | close the client | A's session is CLOSED |

  @R-CB-5
  Scenario Outline: A blocking call made from leader work does not wait for that work
    Given nodes A and B are connected
    And A holds the lock "invoice"
    And A runs leader work for "report" that, once running, will <call>
    Then within one lease duration A's work made the call it was given, and the call returned within one renew interval
    And <effect>

    Examples:
      | call                                           | effect                                                                |
      | stop the election "report"                     | within one renew interval A's term of "report" ends with STOPPED      |
      | step down from "report" for one lease duration | within one renew interval A's term of "report" ends with STEPPED_DOWN |
      | release the lock "invoice"                     | B's one attempt at the lock "invoice" succeeds                        |
      | close the client                               | A's session is CLOSED                                                 |

  @R-CB-5
  Scenario: Closing the client from the event listener does not wait for itself
    Given node A is connected, its event listener closing the client on the first Elected event
    When A starts the election "report"
    Then within one lease duration A's event listener closed the client, and the close returned within one renew interval
    And A's session is CLOSED

  @R-CB-6
  Scenario: An OnElected the executor rejects makes the election step down for one lease duration, silently
    Given node A is connected with a callback executor that rejects the next callback
    When A starts the election "report"
    Then within one lease duration A wins a term of "report" on the backend
    And A's listener for "report" is never told about the term it won on the backend
    And within one renew interval A's snapshot shows "report" as COOLDOWN
    And A makes no attempt at "report" until one lease duration after its win on the backend
    And within two lease durations A is leader of "report" again, with a higher token
    When A stops the election "report"
    Then A's callbacks for "report" pair up: each OnElected followed by one OnRevoked of the same term
    And A's listener for "report" was given 1 different term
