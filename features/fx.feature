@fx
Feature: Simba in an fx application
  A service built with fx gets its client from fxsimba: the client is built
  from the backend the app provides, leader work is declared as fx values,
  no work runs before the app starts, and stopping the app hands every lease
  over in order before the session closes. The session timing may come from
  SIMBA_SESSION_* environment variables, and a bad one fails the app when it
  starts.

  @R-HO-1 @R-WORK-1
  Scenario: Stopping the app hands the leader work over in order, then closes the session
    Given A's fx app runs leader work for "report" that takes 300ms to exit once interrupted
    And the fx app of A starts
    And within one lease duration A is leader of "report"
    When the fx app of A stops
    Then A's handover of "report" went in this order: term revoked, work interrupted, work exited, lease released with its token, call returned
    And A closed its session after releasing "report", before its fx app's stop returned
    And A's session is CLOSED

  @R-HO-1
  Scenario: Stopping the app waits for work that ignores the interruption only until the term's deadline
    Given A's fx app runs leader work for "report" that ignores interruption for 10s
    And the fx app of A starts
    And within one lease duration A is leader of "report"
    When the fx app of A stops
    Then A released "report" at the local deadline its term had at its stop, while the work was still running

  @R-WORK-1
  Scenario: Leader work starts with the app, not when the app is built, and moves when the app stops
    Given A's fx app runs leader work for "report" that takes no time to exit once interrupted
    And B's fx app runs leader work for "report" that takes no time to exit once interrupted
    And the fx app of A is built
    Then A makes no attempt at "report" during one lease duration
    When the fx app of A starts
    Then within one lease duration A is leader of "report"
    When the fx app of B starts
    And the fx app of A stops
    Then within one lease duration B is leader of "report"
    And A's work for "report" ran exactly once in each of its 1 terms, and each run's context ended when its term ended
    And B's work for "report" ran exactly once in each of its 1 terms, and each run's context ended when its term ended

  @R-WORK-1
  Scenario: An app that is built but never started opens no session
    Given A's fx app runs leader work for "report" that takes no time to exit once interrupted
    And the fx app of A is built
    When 2 lease durations pass
    Then A made no backend call

  @R-LOCK-1 @R-WORK-1
  Scenario: A lock taken while the app is built fails the build at once and makes no backend call
    Given A's fx app takes the lock "invoice" in an invocation
    Then building A's fx app fails at once with an error matching ErrClientNotStarted
    And A made no backend call

  @R-LOCK-1 @R-WORK-1
  Scenario: A lock taken in a start hook registered after Simba's is won
    Given A's fx app takes the lock "invoice" in a start hook
    When the fx app of A starts
    Then A's start hook holds its lock

  @R-WORK-2
  Scenario: A schedule runs in the app that leads it only, and moves when that app stops
    Given A's fx app schedules "tick" every 200ms
    And B's fx app schedules "tick" every 200ms
    And the fx app of A starts
    And within one lease duration A is leader of "tick"
    And the fx app of B starts
    When 2 renew intervals pass
    Then A ran "tick" once per period from each term's start while it led, give or take one
    And B never ran "tick"
    When the fx app of A stops
    Then within one lease duration B is leader of "tick"
    When 2 renew intervals pass
    Then B ran "tick" once per period from each term's start while it led, give or take one
    And every run of "tick" on A and B began under a term that was valid, and no run began after its term ended

  @R-GRP-1 @R-GRP-2
  Scenario: Partitioned work spreads over the apps, and again when one app stops
    Given A's fx app runs the group "jobs" of 5 partitions
    And B's fx app runs the group "jobs" of 5 partitions
    And C's fx app runs the group "jobs" of 5 partitions
    When the fx apps of A, B and C start
    Then within 3 lease durations the partitions of "jobs" are spread over A, B and C, each holding within one of an even share
    When the fx app of B stops
    Then within 3 lease durations the partitions of "jobs" are spread over A and C, each holding within one of an even share
    And no partition of "jobs" ever ran under two terms at once, each term ending before the next higher token began
    And partition i of "jobs" is always the lease "jobs.i"

  @R-OBS-2
  Scenario: Every event listener of the app hears every event, even when another one panics
    Given A's fx app runs leader work for "report" that takes no time to exit once interrupted
    And A's fx app has an event listener that panics on every event
    And the fx app of A starts
    And within one lease duration A is leader of "report"
    When the fx app of A stops
    Then A's event listener received, in this order:
      | SessionOpened |                |
      | Elected       | report         |
      | Revoked       | report STOPPED |
      | SessionClosed |                |

  @R-CFG-1
  Scenario: The session timing comes from the environment, with the defaults for what it does not set
    When A's fx app starts with the session timing from the environment:
      | SIMBA_SESSION_LEASE_DURATION | 9s |
      | SIMBA_SESSION_MARGIN         | 0  |
    Then A's client uses the timing:
      | LeaseDuration | 9s    |
      | RenewInterval | 3s    |
      | RetryJitter   | 1.5s  |
      | Drift         | 0.01  |
      | Margin        | 0s    |
      | MinBackoff    | 100ms |

  @R-CFG-2 @R-CFG-3 @R-CFG-4
  Scenario Outline: A bad session timing in the environment fails the app at start, naming the variable and the bound
    When A's fx app starts with the session timing from the environment:
      | SIMBA_SESSION_LEASE_DURATION | <lease>  |
      | SIMBA_SESSION_RENEW_INTERVAL | <renew>  |
      | SIMBA_SESSION_DRIFT          | <drift>  |
      | SIMBA_SESSION_MARGIN         | <margin> |
    Then A's fx app failed to start, with an error naming <variable> and saying "<bound>"
    And A made no backend call

    Examples:
      | lease | renew  | drift | margin | variable                            | bound                                                                  |
      | 10s   | 5001ms |       |        | SIMBA_SESSION_RENEW_INTERVAL=5001ms | two keep-alives must fit in LeaseDuration 10s                          |
      | 1s    | 500ms  | 0.45  |        | SIMBA_SESSION_LEASE_DURATION=1s     | LeaseDuration*(1-Drift)-Margin = 500ms must exceed RenewInterval 500ms |
      |       |        | 0.5   |        | SIMBA_SESSION_DRIFT=0.5             | 0.5 must lie in [0, 0.5)                                               |
      |       |        |       | -1ms   | SIMBA_SESSION_MARGIN=-1ms           | -1ms is negative                                                       |
      | 15    |        |       |        | SIMBA_SESSION_LEASE_DURATION="15"   | want a Go duration                                                     |
