@config
Feature: Session timing
  A client's timing is a plain Config value. Zero fields take their defaults,
  and a client refuses timing under which its session could not be kept alive.
  A config is "accepted" when both Config.Validate and simba.New accept it; it
  is "refused" when both fail with a *simba.ConfigError naming the field, and
  the refused client never made a backend call.

  In the tables below, "none" sets a Drift or Margin of exactly zero
  (Config.NoDrift, Config.NoMargin), and "default" leaves the field at zero
  so that it takes its default.

  @R-CFG-1
  Scenario: An empty config takes the documented defaults
    When config "c" is an empty config with its defaults filled in
    Then config "c" has:
      | LeaseDuration | 15s   |
      | RenewInterval | 5s    |
      | Drift         | 0.01  |
      | Margin        | 50ms  |
      | RetryJitter   | 2.5s  |
      | MinBackoff    | 100ms |

  @R-CFG-1
  Scenario Outline: The derived defaults follow the lease duration and the renew interval
    Given config "c" sets:
      | LeaseDuration | <lease> |
      | RenewInterval | <renew> |
    When node A is connected with config "c"
    Then A's client uses the timing:
      | LeaseDuration | <lease>       |
      | RenewInterval | <renew in use> |
      | RetryJitter   | <jitter>      |
      | Drift         | 0.01          |
      | Margin        | 50ms          |
      | MinBackoff    | 100ms         |

    Examples:
      | lease | renew   | renew in use | jitter |
      | 9s    | default | 3s           | 1.5s   |
      | 9s    | 2s      | 2s           | 1s     |
      | 2s    | 500ms   | 500ms        | 250ms  |

  @R-CFG-2
  Scenario Outline: Two keep-alives must fit in one lease
    Given config "c" sets:
      | LeaseDuration | <lease> |
      | RenewInterval | <renew> |
    Then config "c" is <verdict>

    Examples:
      | lease | renew  | verdict                          |
      | 10s   | 5s     | accepted                         |
      | 10s   | 5001ms | refused because of RenewInterval |
      | 10s   | 8s     | refused because of RenewInterval |
      | 4s    | 2s     | accepted                         |

  @R-CFG-3
  Scenario Outline: The local validity of a lease must exceed the renew interval
    Given config "c" sets:
      | LeaseDuration | <lease>  |
      | RenewInterval | <renew>  |
      | Drift         | <drift>  |
      | Margin        | <margin> |
    Then config "c" is <verdict>

    Examples: lease × (1 − drift) − margin against the renew interval
      | lease | renew | drift | margin | verdict                          |
      | 1s    | 500ms | 0.4   | 50ms   | accepted                         |
      | 1s    | 500ms | 0.45  | 50ms   | refused because of LeaseDuration |
      | 3s    | 1s    | none  | 1999ms | accepted                         |
      | 3s    | 1s    | none  | 2s     | refused because of LeaseDuration |

  @R-CFG-4
  Scenario Outline: Drift outside [0, 0.5) and negative durations are refused with a clear error
    Given config "c" sets:
      | <field> | <value> |
    Then config "c" is refused because of <field>, the error naming it and the value "<value>"

    Examples:
      | field         | value  |
      | Drift         | 0.5    |
      | Drift         | 0.75   |
      | Drift         | -0.01  |
      | Drift         | NaN    |
      | LeaseDuration | -1s    |
      | RenewInterval | -1ms   |
      | Margin        | -1ms   |
      | RetryJitter   | -2s    |
      | MinBackoff    | -100ms |

  @R-CFG-4
  Scenario Outline: Drift inside [0, 0.5) is accepted
    Given config "c" sets:
      | Drift | <value> |
    Then config "c" is accepted

    Examples:
      | value |
      | none  |
      | 0.2   |
      | 0.49  |

  @R-CFG-5
  Scenario: A variant is derived from a config without changing the original
    Given config "c" sets:
      | LeaseDuration | 10s |
      | RenewInterval | 2s  |
    When config "variant" is derived from config "c" with:
      | LeaseDuration | 20s |
      | Margin        | 1s  |
    Then config "variant" has:
      | LeaseDuration | 20s |
      | RenewInterval | 2s  |
      | Margin        | 1s  |
    And config "c" still has:
      | LeaseDuration | 10s     |
      | RenewInterval | 2s      |
      | Margin        | default |
    When node A is connected with config "c"
    And node B is connected with config "variant"
    Then A's client uses the timing:
      | LeaseDuration | 10s  |
      | Margin        | 50ms |
    And B's client uses the timing:
      | LeaseDuration | 20s |
      | Margin        | 1s  |
