@holders
Feature: Holders
  Any node can ask the backend who holds a lease now, whichever node holds
  it: the session, the identity that session carries, the fencing token of
  its term and since when. A lease nobody holds has no holder: never taken,
  released, or its holder's client closed. ObserveHolder reports the holder
  now and at every change: a release at once where releases are broadcast
  (after the minimum backoff, 100ms by default: it never wakes sooner after
  its last read; checked within half a renew interval, as a loaded machine
  delays the delivery), within one renew interval elsewhere.

  @R-OBS-1 @R-TERM-2 @R-SES-4
  Scenario: A node sees the holder of a lock: the other node's identity and token; nobody once it releases; nobody once its client closes
    Given node A is connected with the identity "billing-7 (eu-west)"
    And node B is connected with the identity "node-b"
    Then B sees that nobody holds "invoice"
    When A holds the lock "invoice"
    Then B sees that A holds "invoice", with its identity, its session and the token of its term
    And A sees that A holds "invoice", with its identity, its session and the token of its term
    When A releases the lock "invoice"
    Then B sees that nobody holds "invoice"
    When A holds the lock "invoice"
    Then B sees that A holds "invoice", with its identity, its session and the token of its term
    And A's two terms of "invoice" are different, with different tokens
    When A closes
    Then B sees that nobody holds "invoice"

  @R-OBS-1 @R-TERM-2
  Scenario: The holder of an election is its leader, then the next leader with a higher token
    Given node A is connected with the identity "node-a"
    And node B is connected with the identity "node-b"
    And A is leader of "report"
    And B starts the election "report"
    Then B sees that A holds "report", with its identity, its session and the token of its term
    When A stops the election "report"
    Then within one lease duration B is leader of "report"
    And A sees that B holds "report", with its identity, its session and the token of its term
    And B's token of "report" is above A's

  @R-OBS-1 @R-SES-4
  Scenario Outline: A node observing a lease sees every change of holder, and a release <how>
    Given node A is connected with the identity "node-a"
    And node B is connected with the identity "node-b"
    When B observes the holder of "invoice"
    Then within no time B has observed that nobody holds "invoice"
    When A holds the lock "invoice"
    Then within one renew interval B has observed that A holds "invoice"
    When 2 renew intervals pass
    And A releases the lock "invoice"
    Then within <within> B has observed that nobody holds "invoice"
    When A holds the lock "invoice"
    Then within one renew interval B has observed that A holds "invoice"
    When 2 renew intervals pass
    And A closes
    Then within <within> B has observed that nobody holds "invoice"
    And B observed the holders of "invoice" in this order: nobody, A, nobody, A, nobody

    @broadcast
    Examples: the backend broadcasts releases (memory, Redis, Zookeeper, PostgreSQL)
      | how     | within                |
      | at once | half a renew interval |

    @polling
    Examples: the backend does not (MySQL)
      | how                       | within             |
      | within one renew interval | one renew interval |
