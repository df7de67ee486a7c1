// Package simba is leader election and distributed locks for Go services,
// on a backend the team already runs (PostgreSQL, MySQL/MariaDB, Redis,
// Zookeeper, or the in-memory backend of package memory for tests).
//
// A [Client] opens one session on the backend and renews it with one
// keep-alive per renew interval, whatever the number of leases it holds.
// Winning a named lease gives a [Term]: a fencing token that strictly
// increases per name, and a validity computed from the local monotonic
// clock that always ends before the backend could hand the lease to
// another session (as long as clock rates differ by less than the
// configured drift). A term is a hint for when to start a step, never proof
// that nobody else owns the lease: a paused process can still finish a
// write after its term ended, so a resource that must not be written twice
// checks the token (see package fencing and the fencingtest kit).
//
// On top of terms: an [Election] reports each term to a [Listener] and
// gives the lease up in order on Stop or StepDown; a [Lock] holds a lease
// around one step and releases it from any goroutine; a [Semaphore] hands
// out up to n such terms of one name at once, its permits, with tokens that
// increase across all of them.
//
// A lock that is not won says why, and an outage never reads as
// contention: [ErrLockHeld] when the backend answered that another session
// holds the lease (or this client does), [ErrLockTimeout] when the wait ran
// out, and [ErrBackendUnavailable] as well when, at the end of the wait,
// the backend could not be asked: no live session, or every attempt failed.
//
// A backend is a small adapter behind the [Backend] interface; every timing
// decision is taken here. Backends live in their own modules, so a program
// links only the driver it uses.
package simba
