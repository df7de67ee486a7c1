Feature: Leader work and partition groups through libsimba
  Work runs once per term on the node that leads, and partitions of a
  group spread over the nodes that run it, each worked on by one node at a
  time; stopping hands the leases over in order.

  Background:
    Given nodes "a" and "b" with a lease of 3s

  @R-WORK-1 @R-HO-2
  Scenario: Leader work runs on one node, and the other takes over when it stops
    When node "a" runs leader work on "report" in the background
    Then node "b" sees node "a" holding "report" within 10s
    When node "b" runs leader work on "report" in the background
    And node "a" stops its work on "report"
    Then node "b" sees node "b" holding "report" within 10s
    And the tokens of "report" strictly increase
    When node "b" stops its work on "report"
    Then node "a" sees nobody holding "report" within 5s

  @R-GRP-1 @R-GRP-2
  Scenario: Partitions spread evenly over the nodes and come back when one leaves
    When node "a" runs the group "shards" of 4 partitions in the background
    Then node "a" works on 4 partitions of "shards" within 10s
    When node "b" runs the group "shards" of 4 partitions in the background
    Then node "a" works on 2 partitions of "shards" within 10s
    And node "b" works on 2 partitions of "shards" within 10s
    When node "b" stops its work on "shards"
    Then node "a" works on 4 partitions of "shards" within 10s
    And no partition of "shards" had two nodes working on it
