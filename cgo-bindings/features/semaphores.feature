Feature: Semaphores through libsimba
  The Python package takes permits of a semaphore through the same engine:
  up to n terms of one name at once, with tokens that increase across all
  of them, and the same n asked by every holder.

  Background:
    Given nodes "a" and "b" with a lease of 3s

  @R-SEM-1 @R-SEM-3
  Scenario: At most n permits are held at once, and a waiter gets the one released
    Given node "a" holds a permit of "pool" of 2 as "p1"
    And node "b" holds a permit of "pool" of 2 as "p2"
    Then node "b" fails with LockHeld trying a permit of "pool" of 2
    And node "a" fails with LockTimeout acquiring a permit of "pool" of 2 within 0.3s
    When node "b" acquires a permit of "pool" of 2 within 10s in the background
    And permit "p1" is released
    Then the background acquisition of node "b" wins a permit within 10s
    And the tokens of "pool" strictly increase

  @R-SEM-2
  Scenario: A node that asks with another number of permits fails at once, until none is held
    Given node "a" holds a permit of "pool" of 2 as "p1"
    Then node "b" fails with PermitsMismatch acquiring a permit of "pool" of 3 within 5s
    When permit "p1" is released
    Then node "b" holds a permit of "pool" of 3 as "p2"
