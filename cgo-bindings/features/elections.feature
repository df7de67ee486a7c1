Feature: Elections through libsimba
  Election callbacks cross the C boundary on a thread of the library; they
  stay paired and in order, and may call back into the library.

  Background:
    Given nodes "a" and "b" with a lease of 3s

  @R-CB-1 @R-CB-2 @R-HO-4
  Scenario: Stepping down revokes the term and contends again after the cooldown
    Given node "a" started the election "leader"
    Then node "a" is elected for "leader" within 10s
    When node "a" steps down from "leader" for 0.2s
    Then node "a" saw for "leader" within 10s
      | callback                |
      | elected T1              |
      | revoked T1 STEPPED_DOWN |
      | elected T2              |

  @R-CB-3 @R-HO-1
  Scenario: Stop returns after the last callback, and nothing comes after it
    Given node "a" started the election "leader"
    Then node "a" is elected for "leader" within 10s
    When node "a" stops the election "leader"
    Then node "a" saw for "leader" within 0s
      | callback           |
      | elected T1         |
      | revoked T1 STOPPED |
    And node "a" saw nothing more for "leader" within 0.3s

  @R-CB-5
  Scenario: A callback stops its own election without waiting for itself
    When node "a" starts the election "leader" and stops it from its first callback
    Then node "a" saw for "leader" within 10s
      | callback           |
      | elected T1         |
      | revoked T1 STOPPED |
    And node "a" saw nothing more for "leader" within 0.3s

  @R-CB-3 @R-CB-5
  Scenario: After a stop from a callback, no new term reaches the callbacks
    When node "a" starts the election "leader", steps down in its first callback and stops it from the revoked one
    Then node "a" saw for "leader" within 10s
      | callback                |
      | elected T1              |
      | revoked T1 STEPPED_DOWN |
    And node "a" saw nothing more for "leader" within 0.5s

  @R-HO-2 @R-CAND-2
  Scenario: A stopped leader hands over to the other node
    Given node "a" started the election "leader"
    Then node "a" is elected for "leader" within 10s
    When node "b" starts the election "leader"
    Then node "b" is not elected for "leader" within 0.3s
    When node "a" stops the election "leader"
    Then node "b" is elected for "leader" within 10s
    And the tokens of "leader" strictly increase

  @R-OBS-1
  Scenario: The snapshot shows the leader and the candidate
    Given node "a" started the election "leader"
    Then node "a" is elected for "leader" within 10s
    When node "b" starts the election "leader"
    Then the snapshot of node "a" shows "leader" as HOLDING
    And the snapshot of node "b" shows "leader" as CONTENDING

  Scenario: Backend URLs that cannot be opened are refused clearly
    Then opening "localhost:6379" fails with InvalidURL
    And opening "etcd://127.0.0.1" fails with InvalidURL
    And opening "redis://user:hunter2@127.0.0.1:1/0" fails with BackendUnavailable
