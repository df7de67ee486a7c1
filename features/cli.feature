@cli
Feature: The simba command
  `simba lock`, `simba leader` and `simba status` (tools/cmd/simba), run as
  the built binary in processes of their own, "simba 1", "simba 2", ..., with
  the backend in SIMBA_BACKEND and the scenario's lease duration as
  `--lease`. simba runs the command after `--` with SIMBA_LEASE (the lease
  name) and SIMBA_TOKEN (the term's fencing token) in its environment, and
  no other SIMBA_ variable; it stops the command (SIGTERM to its process
  group) when the term ends or when simba itself is told to stop; and its
  exit code says what happened. On memory:// every simba process has a store
  of its own, so the scenarios where two processes share a lease, or where
  a node beside simba sees its leases, run on Redis.

  @R-TERM-2
  Scenario: simba lock runs the command with the lease and its token, and exits with the command's code
    When simba 1 runs `lock "report" -- sh -c 'env; exit 3'`, with `SIMBA_EXTRA=1 simba_lower=2` in its environment
    Then simba 1 exits with code 3
    And simba 1's output has `SIMBA_LEASE=report`
    And simba 1's output has `SIMBA_TOKEN=<token>`
    And simba 1's output has no `SIMBA_BACKEND`
    And simba 1's output has no `SIMBA_EXTRA`
    And simba 1's output has no `simba_lower`

  Scenario Outline: simba exits with a code of its own when the command cannot run: <why>
    When simba 1 runs `<command line>`
    Then simba 1 exits with code <code>
    And simba 1's stderr has `<message>`

    Examples:
      | why                    | command line                                    | code | message                                         |
      | not found              | lock "report" -- no-such-command                | 127  | simba lock: command "no-such-command" not found |
      | not found, for leader  | leader "report" -- no-such-command              | 127  | simba leader: command "no-such-command" not found |
      | not executable         | lock "report" -- /etc/passwd                    | 126  | simba lock: command "/etc/passwd" is not executable |
      | no command             | lock "report"                                   | 2    | simba lock: missing command                     |
      | a negative timeout     | lock "report" --timeout -1s -- true             | 2    | simba lock: --timeout -1s: must not be negative |
      | an unknown format      | status --format yaml                            | 2    | simba status: --format "yaml": want table or json |
      | a bad backend URL      | lock "report" --backend memory: -- true         | 2    | simba lock: backend URL "memory:": missing "//" |
      | a backend not reached  | lock "report" --backend redis://127.0.0.1:1 -- true | 69 | simba lock: backend redis://127.0.0.1:1 unavailable |
      | a page size out of bounds | status --list --limit 0                      | 2    | simba status: invalid value "0" for flag --limit |

    @R-NAME-1
    Examples:
      | why                    | command line                                    | code | message                                         |
      | an invalid lease name  | lock 'bad/name' -- true                         | 2    | simba lock: simba: invalid lease name "bad/name" |
      | an invalid holder name | status --holder 'bad/name'                      | 2    | simba status: invalid value "bad/name" for flag --holder |

  @R-HO-1
  Scenario Outline: On <signal> simba lock stops the command, exits with the command's code and leaves the lock free
    Given simba 1 runs `lock "report" --grace 1s -- sh -c 'trap "echo stopped by TERM; exit 7" TERM; echo holding; while :; do sleep 0.1; done'`
    And within one lease duration simba 1's output has `holding`
    When simba 1 gets <signal>
    Then within one lease duration simba 1 exits with code 7
    And simba 1's output has `stopped by TERM`
    When simba 2 runs `lock "report" --timeout 1s -- true`
    Then simba 2 exits with code 0

    Examples:
      | signal  |
      | SIGTERM |
      | SIGINT  |
      | SIGHUP  |

  @R-DL-3 @R-HO-3 @R-LOCK-7
  Scenario: A simba paused past its lease has lost the lock: it stops the command and exits with 76
    Given simba 1 runs `lock "report" --grace 1s -- sh -c 'trap "echo stopped by TERM; exit 0" TERM; echo holding; while :; do sleep 0.1; done'`
    And within one lease duration simba 1's output has `holding`
    When simba 1 gets SIGSTOP
    And one lease duration passes
    And simba 1 gets SIGCONT
    Then within one lease duration simba 1 exits with code 76
    And simba 1's stderr has `simba lock: lost lock report (token <token>): DEADLINE_PASSED; stopping the command`
    And simba 1's output has `stopped by TERM`

  @redis @R-TERM-8 @R-HO-3
  Scenario: A lock taken over on the backend is lost: simba stops the command and exits with 76
    Given simba 1 runs `lock "report" --grace 1s -- sh -c 'trap "echo stopped by TERM; exit 0" TERM; echo holding; while :; do sleep 0.1; done'`
    And within one lease duration simba 1's output has `holding`
    When another session takes "report" over
    Then within one lease duration simba 1 exits with code 76
    And simba 1's stderr has `simba lock: lost lock report (token <token>): TAKEN_OVER; stopping the command`
    And simba 1's output has `stopped by TERM`

  @redis @R-LOCK-1 @R-TERM-2
  Scenario: A second simba lock waits for the first, or gives up after --timeout with 75
    Given simba 1 runs `lock "report" -- sh -c 'echo "SIMBA_TOKEN=$SIMBA_TOKEN"; exec sleep 60'`
    And within one lease duration simba 1's output has `SIMBA_TOKEN=<token>`
    When simba 2 runs `lock "report" --timeout 1s -- true`
    Then within 2s simba 2 exits with code 75
    And simba 2's stderr has `simba lock: lock report not acquired within 1s`
    When simba 3 runs `lock "report" -- env`
    And one lease duration passes
    Then simba 3's output has no `SIMBA_TOKEN`
    When simba 1 gets SIGTERM
    Then within one lease duration simba 1 exits with code 143
    And within one lease duration simba 3 exits with code 0
    And the tokens printed by the commands of simba 1 and then simba 3 increase

  @redis @R-LOCK-6
  Scenario: simba lock releases the lock once the command has exited
    Given node A is connected
    When simba 1 runs `lock "report" -- true`
    Then simba 1 exits with code 0
    And A's one attempt at the lock "report" succeeds

  @memory
  Scenario: On memory:// each simba has a store of its own: two processes both hold the lock, and each warns
    Given simba 1 runs `lock "report" -- sh -c 'echo "SIMBA_TOKEN=$SIMBA_TOKEN"; exec sleep 60'`
    And within one lease duration simba 1's output has `SIMBA_TOKEN=1`
    When simba 2 runs `lock "report" --timeout 1s -- env`
    Then within one lease duration simba 2 exits with code 0
    And simba 2's output has `SIMBA_TOKEN=1`
    And simba 1's stderr has `simba lock: warning: memory:// is a store in this process only`
    And simba 2's stderr has `simba lock: warning: memory:// is a store in this process only`

  @R-HO-3 @R-TERM-2 @R-TERM-4
  Scenario: simba leader stops the command when its term ends, and runs it again in its next term, with a higher token
    Given simba 1 runs `leader "report" -- sh -c 'echo "SIMBA_TOKEN=$SIMBA_TOKEN"; exec sleep 60'`
    And within one lease duration simba 1's stderr has `simba leader: leading report with token <token>: starting sh`
    And within one lease duration simba 1's output has `SIMBA_TOKEN=<token>`
    When simba 1 gets SIGSTOP
    And one lease duration passes
    And simba 1 gets SIGCONT
    Then within one lease duration simba 1's stderr has `simba leader: term of report with token <token> ended: DEADLINE_PASSED; stopping sh`
    And within 2 lease durations simba 1's stderr has `simba leader: sh stopped (exit code 143); waiting for the next term`
    And within 3 lease durations the tokens printed by the commands of simba 1 increase
    When simba 1 gets SIGTERM
    Then within one lease duration simba 1 exits with code 143

  Scenario: simba leader exits with the command's code when the command exits on its own
    When simba 1 runs `leader "report" -- sh -c 'exit 4'`
    Then within one lease duration simba 1 exits with code 4
    And simba 1's stderr has `simba leader: sh exited with code 4: giving report up`

  @redis @R-CAND-2 @R-TERM-2
  Scenario: One simba leader of several runs the command; when it stops, another takes over at once
    Given simba 1 runs `leader "report" -- sh -c 'echo "SIMBA_TOKEN=$SIMBA_TOKEN"; exec sleep 60'`
    And within one lease duration simba 1's output has `SIMBA_TOKEN=<token>`
    And simba 2 runs `leader "report" -- sh -c 'echo "SIMBA_TOKEN=$SIMBA_TOKEN"; exec sleep 60'`
    And simba 3 runs `leader "report" -- sh -c 'echo "SIMBA_TOKEN=$SIMBA_TOKEN"; exec sleep 60'`
    When one lease duration passes
    Then simba 2's output has no `SIMBA_TOKEN`
    And simba 3's output has no `SIMBA_TOKEN`
    When simba 2 gets SIGINT
    Then within one lease duration simba 2 exits with code 130
    When simba 1 gets SIGTERM
    Then within one lease duration simba 1 exits with code 143
    And within half a lease duration simba 3's output has `SIMBA_TOKEN=<token>`
    And the tokens printed by the commands of simba 1 and then simba 3 increase

  @redis @R-HO-2
  Scenario: simba leader gives the lease up when the command exits: a node waiting for it leads at once
    Given simba 1 runs `leader "report" -- sh -c 'echo "SIMBA_TOKEN=$SIMBA_TOKEN"; sleep 2; exit 4'`
    And within one lease duration simba 1's output has `SIMBA_TOKEN=<token>`
    And node A is connected
    And A starts the election "report"
    When within one lease duration simba 1 exits with code 4
    Then within half a lease duration A is leader of "report"

  @R-OBS-1
  Scenario: simba status shows its own session, LIVE, renewed every third of the lease
    When simba 1 runs `status`
    Then simba 1 exits with code 0
    And simba 1's output has `status: LIVE`
    And simba 1's output has `renew: every 667ms`

  Scenario: simba status --holder shows a lease nobody holds as free, and not its own session
    When simba 1 runs `status --holder "report"`
    Then simba 1 exits with code 0
    And simba 1's output has `report free - - -`
    And simba 1's output has no `session:`

  Scenario: simba status --list says when nothing is held under the prefix
    When simba 1 runs `status --list --prefix "billing."`
    Then simba 1 exits with code 0
    And simba 1's output has `held: none on this page`
    And simba 1's output has no `session:`

  @redis @R-OBS-1
  Scenario: simba status --holder shows who holds a lease: the holder's identity and the token of its term
    Given node A is connected with the identity "ops-1"
    And A holds the lock "report"
    When simba 1 runs `status --holder "report"`
    Then simba 1 exits with code 0
    And simba 1's output has `report ops-1`

  @redis @R-OBS-1
  Scenario: simba status --list lists the leases held under a prefix, by any node, one page at a time
    Given node A is connected with the identity "ops-1"
    And node B is connected with the identity "ops-2"
    And A holds the lock "billing.eu"
    And B is leader of "billing.us"
    And A holds the lock "other"
    When simba 1 runs `status --list --prefix "billing."`
    Then simba 1 exits with code 0
    And simba 1's output has `billing.eu ops-1`
    And simba 1's output has `billing.us ops-2`
    And simba 1's output has no `other`
    And simba 1's output has no `next page`
    And simba 1's output has no `session:`
    When simba 2 runs `status --list --prefix "billing." --limit 1`
    Then simba 2 exits with code 0
    And simba 2's output has `next page: --after`
