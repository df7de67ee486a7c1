@names
Feature: Lease names
  A lease name means the same thing on every backend (a Redis key, a Zookeeper
  node, a SQL column value): 1 to 128 characters of [A-Za-z0-9._:-], other
  than "." and "..". Anything else is refused with an error saying what is
  wrong, before any call reaches the backend.

  Names in these scenarios are used exactly as written, without the
  per-scenario suffix other features add to keep scenarios apart.

  Background:
    Given nodes A and B are connected

  @R-NAME-1
  Scenario Outline: An invalid name is refused before any backend call
    Then A's election, lock and one-shot lock attempt named <name> are each refused with ErrInvalidName, the error quoting the name and saying "<why>", and A made no backend call about that name

    Examples:
      | name            | why                  |
      | ""              | empty                |
      | "."             | reserved             |
      | ".."            | reserved             |
      | "two words"     | is not one of        |
      | "a/b"           | is not one of        |
      | "café"          | is not one of        |
      | "lease*"        | is not one of        |
      | "semi;colon"    | is not one of        |
      | 129 characters  | at most 128 allowed  |
      | 1000 characters | at most 128 allowed  |

  @R-NAME-1
  Scenario Outline: A valid name works, and names one lease for every client
    When A acquires the lock named <name> within one lease duration
    Then A holds the lock named <name>, with a token above zero
    And B's one attempt at the lock named <name> fails with ErrLockHeld
    When A releases the lock named <name>
    Then B's one attempt at the lock named <name> succeeds

    Examples:
      | name                   |
      | "a"                    |
      | "Report-2024_Q3.v2:eu" |
      | "..."                  |
      | "-"                    |
      | ":.:"                  |
      | 128 characters         |
