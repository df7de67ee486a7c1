Feature: Locks through libsimba
  Programs in other languages take locks through the same engine, with the
  same guarantees: the Python package over the real libsimba.so.

  Background:
    Given nodes "a" and "b" with a lease of 3s

  @R-LOCK-1 @R-LOCK-5
  Scenario: An acquisition waits for the release, or times out
    Given node "a" holds "job"
    Then node "b" fails with LockTimeout acquiring "job" within 0.2s
    When node "b" acquires "job" within 10s in the background
    And node "a" releases "job"
    Then the background acquisition of node "b" wins "job" within 10s
    And the tokens of "job" strictly increase

  @R-LOCK-3
  Scenario: A try-acquisition of a held lock fails at once, elsewhere and on the holder
    Given node "a" holds "job"
    Then node "b" fails with LockHeld trying "job"
    And node "a" fails with LockHeld trying "job"

  @R-LOCK-6 @R-TERM-3 @R-TERM-4 @R-TERM-7
  Scenario: A released term has ended for good, and releasing it again is a no-op
    Given node "a" holds "job"
    Then the term of node "a" on "job" is valid
    When node "a" releases "job"
    And node "a" releases "job"
    Then the term of node "a" on "job" has ended with STOPPED
    When node "a" acquires "job" within 10s
    Then the term of node "a" on "job" is valid
    And the tokens of "job" strictly increase

  @R-TERM-2
  Scenario: Tokens strictly increase across holders
    Given node "a" holds "job"
    When node "a" releases "job"
    And node "b" acquires "job" within 10s
    And node "b" releases "job"
    And node "a" acquires "job" within 10s
    Then the tokens of "job" strictly increase

  @R-SES-4
  Scenario: Closing a node frees its leases at once
    Given node "a" holds "job"
    When node "a" closes
    Then the term of node "a" on "job" has ended with STOPPED
    When node "b" acquires "job" within 2s
    Then the tokens of "job" strictly increase

  @R-LOCK-8 @R-CB-4
  Scenario: A lock and an election of one name share one lease
    Given node "a" started the election "leader"
    Then node "a" fails with NameInUse trying "leader"
    And node "a" fails with AlreadyStarted starting the election "leader"

  @R-NAME-1
  Scenario Outline: A bad lease name is refused before any backend call
    Then node "a" fails with InvalidName using the name "<name>"

    Examples:
      | name        |
      | (empty)     |
      | .           |
      | ..          |
      | a/b         |
      | tab\there   |
      | nul\x00byte |
      | émile       |

  @R-OBS-1
  Scenario: The snapshot shows the session and the locks
    Given node "a" holds "job"
    Then the snapshot of node "a" shows "job" as HOLDING

  @R-LOCK-2
  Scenario: Ctrl-C interrupts a wait without a timeout, and nothing it won stays held
    Given node "a" holds "job"
    Then node "b" waiting for "job" without a timeout is interrupted within 0.15s
    When node "a" releases "job"
    Then node "b" holds no lease
    When node "a" acquires "job" within 0s
    Then node "b" holds no lease

  @R-LOCK-1 @R-LOCK-3
  Scenario: A timeout of 0 makes one attempt
    Given node "a" acquired "warm" within 10s
    And node "b" acquired "warm2" within 10s
    When node "a" acquires "job" within 0s
    Then node "b" fails with LockTimeout acquiring "job" within 0s
    When node "a" releases "job"
    And node "b" acquires "job" within 0s
    Then the tokens of "job" strictly increase
