@semaphores
Feature: Semaphores
  A semaphore of n permits hands out up to n terms of one name at once,
  each a permit: the lease name:i of one of its slots, with a fencing token
  that increases across all of them in the order they are granted. Every
  holder asks with the same n.

  @R-SEM-1 @R-SEM-3
  Scenario: At most n permits are held at once, and a waiter gets the one released
    Given nodes A, B and C are connected
    And A holds a permit of the semaphore "pool" of 2
    And B holds a permit of the semaphore "pool" of 2
    When C makes one attempt at a permit of the semaphore "pool" of 2, which fails with ErrLockHeld
    And C begins to acquire a permit of the semaphore "pool" of 2 within 3 lease durations
    Then A, B and C hold 2 valid permits of "pool" between them
    When A releases its permit of "pool"
    Then within one lease duration C got a permit of "pool", with a token above every earlier permit's
    And A, B and C hold 2 valid permits of "pool" between them

  @R-SEM-1 @R-SEM-3
  Scenario: One node holds several permits of a semaphore, each with its own token
    Given node A is connected
    And A holds a permit of the semaphore "pool" of 3
    And A holds a permit of the semaphore "pool" of 3
    And A holds a permit of the semaphore "pool" of 3
    Then A makes one attempt at a permit of the semaphore "pool" of 3, which fails with ErrLockHeld
    And A holds 3 valid permits of "pool" between them

  @R-SEM-1
  Scenario: The permit of a holder cut off from the backend goes to a waiter only once it is no longer valid
    Given nodes A and B are connected
    And A holds a permit of the semaphore "one" of 1
    When B begins to acquire a permit of the semaphore "one" of 1 within 5 lease durations
    And A's connection stalls
    Then within 2 lease durations B got a permit of "one", with a token above every earlier permit's, once A's were no longer valid

  @R-SEM-2
  Scenario: A node that asks with another number of permits fails at once, until none is held
    Given nodes A and B are connected
    And A holds a permit of the semaphore "pool" of 2
    When B acquires a permit of the semaphore "pool" of 3, which fails at once with ErrPermitsMismatch
    And A acquires a permit of the semaphore "pool" of 1, which fails at once with ErrPermitsMismatch
    And A releases its permit of "pool"
    Then B holds a permit of the semaphore "pool" of 3
    And A acquires a permit of the semaphore "pool" of 2, which fails at once with ErrPermitsMismatch
