@fencing
Feature: Fencing tokens
  A term's validity cannot stop a holder that was cut off or paused and
  wakes up after losing its lease: only the protected resource can refuse
  its late write, by accepting a token only if it is at least the highest it
  accepted. Here node A holds a term, loses its connection long enough for
  its session to end on the backend, node B wins a newer term and writes,
  and A's late write with its old token is refused, by the in-process
  recipe on every backend and by the backend's own recipe where it has one.

  @R-FEN-1
  Scenario Outline: A writer whose term ended while it was cut off cannot overwrite the newer holder's write
    Given nodes A and B are connected
    And the fenced values kept <recipes>
    And A is leader of "ledger"
    And B starts the election "ledger"
    And A writes "a1" to each fenced value with its term of "ledger", which is accepted
    And A writes "a1 again" to each fenced value with its term of "ledger", which is accepted
    When A's connection stalls, as if A had crashed
    Then B is leader of "ledger" within one lease duration plus one candidate attempt of A's stall
    And A's term of "ledger" is not valid and has no time remaining
    And B writes "b1" to each fenced value with its term of "ledger", which is accepted
    And A writes "a2" to each fenced value with its term of "ledger", which is refused
    And each fenced value holds "b1" with B's token of "ledger"

    @memory @zk
    Examples: backends without a recipe of their own
      | recipes    |
      | in process |

    @redis
    Examples: Redis
      | recipes                 |
      | in process and in Redis |

    @postgres @mysql
    Examples: SQL
      | recipes                        |
      | in process and in a SQL table |

  @R-FEN-2
  Scenario: The fencing kit passes the in-process recipe and fails a resource that ignores tokens
    Then the fencing kit passes the recipe kept in process
    And the fencing kit fails a resource that ignores tokens, naming exactly the checks LowerToken, ZeroToken, LargeTokens and Atomic

  @R-FEN-2 @redis
  Scenario: The fencing kit passes the Redis recipe
    Then the fencing kit passes the recipe kept in Redis

  @R-FEN-2 @postgres @mysql
  Scenario: The fencing kit passes the SQL recipe
    Then the fencing kit passes the recipe kept in a SQL table

  @R-FTX-1 @postgres @mysql
  Scenario: A writer cut off until its term ended writes nothing in a transaction of that term
    Given nodes A and B are connected
    And A is leader of "ledger"
    And B starts the election "ledger"
    And A writes "a1" in a transaction of its term of "ledger", which commits
    When A's connection stalls, as if A had crashed
    Then B is leader of "ledger" within one lease duration plus one candidate attempt of A's stall
    And B writes "b1" in a transaction of its term of "ledger", which commits
    And A writes "a2" in a transaction of its term of "ledger", which writes nothing
    And the transactions in a term wrote "a1" and "b1"

  @R-FTX-1 @postgres @mysql
  Scenario: A valid term whose record names another token writes nothing in a transaction
    Given node A is connected
    And A is leader of "ledger"
    When the backend's record of "ledger" is changed by hand to another token
    Then A writes "a1" in a transaction of its term of "ledger", which writes nothing
    And A's term of "ledger" is still valid
    And the transactions in a term wrote nothing

  @R-FTX-2 @postgres @mysql
  Scenario: A write of the lease's record waits for a transaction in the holder's term
    Given node A is connected
    And A is leader of "ledger"
    Then A keeps a transaction of its term of "ledger" open while a write of the backend's record of "ledger" waits for it, then commits
    And the transactions in a term wrote "held open"
