@work
Feature: Leader work and scheduled work
  RunWhileLeader runs a function once for every term the node wins, with a
  context that ends when the term ends, whatever ends it. Schedule runs a
  function periodically, on the leader only: a follower never runs it, and
  when the lease moves to another node, the schedule moves with it.

  @R-WORK-1
  Scenario: Leader work runs once per term, and its context ends when the term ends
    Given nodes A and B are connected
    And A runs leader work for "report" that takes no time to exit once interrupted
    And within one lease duration A is leader of "report"
    And B runs leader work for "report" that takes no time to exit once interrupted
    When A steps down from "report" for 2 renew intervals
    Then within one lease duration B is leader of "report"
    When B stops the election "report"
    Then within one lease duration A is leader of "report" again
    And A's work for "report" ran exactly once in each of its 2 terms, and each run's context ended when its term ended
    And B's work for "report" ran exactly once in each of its 1 terms, and each run's context ended when its term ended

  @R-WORK-1
  Scenario: The work's context ends at the instant its term is taken over or its deadline passes
    Given node A is connected
    And A runs leader work for "report" that takes no time to exit once interrupted
    And within one lease duration A is leader of "report"
    When another session takes "report" over
    Then within one lease duration A's term of "report" ends with TAKEN_OVER
    When the session that took "report" over expires
    Then within 2 lease durations A is leader of "report" again
    When A's connection stalls
    Then within 2 lease durations A's term of "report" ends with DEADLINE_PASSED
    When A's connection heals
    Then within 2 lease durations A is leader of "report" again
    And A's work for "report" ran exactly once in each of its 3 terms, and each run's context ended when its term ended

  @R-WORK-2
  Scenario: A schedule runs on the leader only, and moves with the lease
    Given nodes A and B are connected
    And A schedules "tick" every 200ms
    And within one lease duration A is leader of "tick"
    And B schedules "tick" every 200ms
    When 2 renew intervals pass
    Then A ran "tick" once per period from each term's start while it led, give or take one
    And B never ran "tick"
    When A closes
    Then within one lease duration B is leader of "tick"
    When 2 renew intervals pass
    Then B ran "tick" once per period from each term's start while it led, give or take one
    And A ran "tick" once per period from each term's start while it led, give or take one
    And every run of "tick" on A and B began under a term that was valid, and no run began after its term ended

  @R-WORK-2 @memory
  Scenario Outline: Runs start at a fixed rate, or after a fixed delay, from the term's start
    Given node A is connected
    And A schedules "tick" every 1s<options>, each run taking <takes>
    And within one lease duration A is leader of "tick"
    When 4500ms pass
    Then A's runs of "tick" started at these times after its term began: <starts>

    Examples:
      | options                   | takes | starts                        |
      |                           | 400ms | 0s, 1s, 2s, 3s, 4s            |
      | , with a fixed delay      | 400ms | 0s, 1.4s, 2.8s, 4.2s          |
      | , first after 300ms       | 400ms | 300ms, 1.3s, 2.3s, 3.3s, 4.3s |
      |                           | 1.5s  | 0s, 2s, 4s                    |

  @R-WORK-1 @R-HO-1
  Scenario Outline: Work that ends while its term lasts ends the call, and the lease goes to the next node
    Given nodes A and B are connected
    And A runs leader work for "report" that <ends> after 200ms
    And within one lease duration A is leader of "report"
    And B runs leader work for "report" that takes no time to exit once interrupted
    Then within one lease duration A's leader work call for "report" returns <result>
    And within one lease duration B is leader of "report"
    And A's term of "report" had ended with STOPPED before B's term began

    Examples:
      | ends     | result              |
      | fails    | the work's failure  |
      | panics   | the work's failure  |
      | finishes | nil                 |
