Feature: Who holds a lease, and the events of a node, through libsimba
  Any node asks the backend who holds a lease; a node's events reach a
  stream of its own, in order, through a bounded queue that never makes
  the engine wait and tells its reader what it missed.

  Background:
    Given nodes "a" and "b" with a lease of 3s

  @R-OBS-1
  Scenario: Every node sees the holder of a lease, and nobody once it is released
    Then node "b" sees nobody holding "job" within 5s
    Given node "a" holds "job"
    Then node "b" sees node "a" holding "job" within 5s
    And node "a" sees node "a" holding "job" within 5s
    When node "a" releases "job"
    Then node "b" sees nobody holding "job" within 5s

  @R-OBS-1 @R-SES-4
  Scenario: A closed node no longer holds anything
    Given node "a" holds "job"
    When node "a" closes
    Then node "b" sees nobody holding "job" within 5s

  @R-OBS-2 @R-TERM-6
  Scenario: A node's events reach its stream in order, up to the close, with reasons by name
    Given node "a" listens to its events keeping 64
    When node "a" acquires "job" within 10s
    And node "a" releases "job"
    And node "a" closes
    Then node "a" gets the events within 10s
      | event                    |
      | ELECTED job lock         |
      | REVOKED job lock STOPPED |
      | SESSION_CLOSED           |
    And node "a" was told of every event it missed

  @R-OBS-2
  Scenario: A reader that falls behind loses the oldest events and is told how many
    Given node "a" listens to its events keeping 4
    When node "a" takes and releases "job" 50 times
    Then node "a" gets the events within 10s
      | event                    |
      | DROPPED                  |
      | REVOKED job lock STOPPED |
    And node "a" was told of every event it missed
