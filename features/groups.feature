@groups
Feature: Partition groups
  A group of n partitions spreads n leases, named after the group and the
  partition number, over the nodes that run it. Each partition is held by at
  most one node at a time, and as nodes join and leave the partitions settle
  within one of an even share, each move an ordered handover.

  @R-GRP-1 @R-GRP-2
  Scenario: Five partitions spread over one, two and three nodes, and again when one leaves
    Given nodes A, B, C and D are connected
    When A runs the group "jobs" of 5 partitions
    Then within 2 lease durations the partitions of "jobs" are spread over A, each holding within one of an even share
    When B runs the group "jobs" of 5 partitions
    Then within 3 lease durations the partitions of "jobs" are spread over A and B, each holding within one of an even share
    When C runs the group "jobs" of 5 partitions
    Then within 3 lease durations the partitions of "jobs" are spread over A, B and C, each holding within one of an even share
    When B leaves the group "jobs"
    Then within 3 lease durations the partitions of "jobs" are spread over A and C, each holding within one of an even share
    And no partition of "jobs" ever ran under two terms at once, each term ending before the next higher token began
    And partition i of "jobs" is always the lease "jobs.i"
    And D's one attempt at each lease "jobs.i" fails with ErrLockHeld

  @R-GRP-1 @R-GRP-2 @memory
  Scenario: Seven partitions over up to five nodes, as nodes join, leave and crash
    Given nodes A, B, C, D, E and F are connected
    When A, B, C, D and E run the group "jobs" of 7 partitions
    Then within 3 lease durations the partitions of "jobs" are spread over A, B, C, D and E, each holding within one of an even share
    When D leaves the group "jobs"
    And E's connection stalls, as if E had crashed
    Then within 4 lease durations the partitions of "jobs" are spread over A, B and C, each holding within one of an even share
    When D runs the group "jobs" of 7 partitions
    And F runs the group "jobs" of 7 partitions
    Then within 3 lease durations the partitions of "jobs" are spread over A, B, C, D and F, each holding within one of an even share
    And no partition of "jobs" ever ran under two terms at once, each term ending before the next higher token began
    And partition i of "jobs" is always the lease "jobs.i"
