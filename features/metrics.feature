@metrics
Feature: Metrics
  A node's Prometheus collector (package simbametrics) counts what its
  client's events report and reads the rest from the client's snapshot at
  each scrape. A lease named in a metric's labels is the scenario's lease;
  every lock shares the label value "*".

  @R-OBS-1 @R-OBS-2
  Scenario: A node's metrics show its session LIVE
    Given node A is connected, with metrics
    Then within one lease duration A's metric simba_session_status{status="LIVE"} is 1
    And A's metric simba_session_status{status="OPENING"} is 0
    And A's metric simba_sessions_opened_total is 1
    And A's metric simba_session_remaining_seconds is above zero
    And within two renew intervals A's metric simba_keepalive_duration_seconds_count is above zero
    And A's metric simba_keepalive_failures_total is 0

  @R-OBS-1 @R-OBS-2
  Scenario: A won term is counted, and its validity shown
    Given node A is connected, with metrics
    And A is leader of "report"
    And A holds the lock "invoice"
    Then within one renew interval A's metric simba_terms_won_total{kind="election",lease="report"} is 1
    And within one renew interval A's metric simba_terms_won_total{kind="lock",lease="*"} is 1
    And A's metric simba_lock_acquire_wait_seconds_count{lease="*"} is 1
    And A's metric simba_term_remaining_seconds{kind="election",lease="report"} is above zero
    And A's metric simba_term_remaining_seconds{kind="lock",lease="*"} is above zero
    And A's metric simba_terms_ended_total{kind="election",lease="report"} is 0

  @R-OBS-2
  Scenario: A revocation is counted by its reason
    Given node A is connected, with metrics
    And A is leader of "report"
    And A holds the lock "invoice"
    When A stops the election "report"
    And A releases the lock "invoice"
    Then within one renew interval A's metric simba_terms_ended_total{kind="election",lease="report",reason="STOPPED"} is 1
    And within one renew interval A's metric simba_terms_ended_total{kind="lock",lease="*",reason="STOPPED"} is 1
    And A's metric simba_terms_ended_total{kind="election",lease="report",reason="DEADLINE_PASSED"} is 0
    And A's metric simba_terms_ended_total{kind="election",lease="report",reason="SESSION_EXPIRED"} is 0

  @R-OBS-2
  Scenario: Terms lost with an expired session are counted with its reason
    Given node A is connected, with metrics
    And A is leader of "report"
    When the backend expires A's session
    And within one lease duration A is leader of "report" again, with a higher token
    Then within one renew interval A's metric simba_terms_ended_total{kind="election",lease="report",reason="SESSION_EXPIRED"} is 1
    And A's metric simba_sessions_ended_total{reason="SESSION_EXPIRED"} is 1
    And A's metric simba_sessions_opened_total is 2
    And A's metric simba_terms_won_total{kind="election",lease="report"} is 2
