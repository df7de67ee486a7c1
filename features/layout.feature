@layout
Feature: What each backend stores
  Each backend keeps sessions and leases in its own way, read here straight
  from the server: SQL tables whose lease rows outlive their holders, Redis
  hashes of which only the session's expires, Zookeeper ephemeral nodes
  owned by the session whose creation id is the token.

  @R-BE-1 @postgres @mysql
  Scenario: SQL keeps a session row and a lease row that is never deleted, its token one higher per term
    Given nodes A and B are connected
    And A is leader of "layout"
    Then the backend keeps A's session as one record that expires at most one lease duration from the server's clock
    And the backend's record of "layout" names A's session and token
    When A stops the election "layout"
    Then the backend still keeps the record of "layout", naming no session, with A's token
    When B starts the election "layout"
    Then within one lease duration B is leader of "layout"
    And the backend's record of "layout" names B's session and token
    And B's token of "layout" is one above A's

  @R-BE-2 @redis
  Scenario: Redis keeps an expiring session hash, a lease hash that never expires, tokens from its clock, and announces releases
    Given nodes A and B are connected
    And A is leader of "layout"
    And a subscriber listens on the backend's release channel
    Then the backend keeps A's session as one record that expires at most one lease duration from the server's clock
    And the backend's record of "layout" names A's session and token, and never expires
    When B starts the election "layout"
    And B is watching for the release of "layout"
    And A stops the election "layout"
    Then the subscriber heard the release of "layout", addressed to the node that waits for it
    And within 1s B is leader of "layout"
    And the backend's record of "layout" names B's session and token, and never expires
    And B's token of "layout" is above A's
    And B's token of "layout" is the server's clock in microseconds when B won it
    When B stops the election "layout"
    Then the backend still keeps the record of "layout", naming no session, with B's token

  @R-BE-3 @zk
  Scenario: Zookeeper keeps a lease as an ephemeral node of the session, its token the node's creation id
    Given node A is connected
    And A is leader of "layout"
    And node B is connected
    And B starts the election "layout"
    And B's attempt at "layout" was refused
    And B is watching for the release of "layout"
    Then the backend's record of "layout" names A's session and token
    When A stops the election "layout"
    Then within 1s B is leader of "layout"
    And B won "layout" at its first attempt after A's stop, long before its next regular attempt was due
    And the backend's record of "layout" names B's session and token
    And B's token of "layout" is above A's
