@backends
Feature: Failover on every backend
  When a leader stops answering (a crash, a frozen process, a partition), its
  session expires on the backend after the lease duration (on Zookeeper, the
  negotiated session timeout) and another node takes the lease over at its
  next attempt. Here the leader's connection is black-holed: on the memory
  backend by the store's fault controls, on real servers by a TCP proxy.

  @R-BE-4
  Scenario: Another node takes over about one lease duration after the leader stalls
    Given nodes A and B are connected
    And A is leader of "report"
    And B starts the election "report"
    And B's attempt at "report" was refused
    When A's connection stalls, as if A had crashed
    Then B is leader of "report" within one lease duration plus one candidate attempt of A's stall
    And A's term of "report" had ended with DEADLINE_PASSED before B's term began
