"""The exceptions of simba, one per status code of simba.h."""

from __future__ import annotations

OK = 0
INVALID_ARGUMENT = 1
INVALID_NAME = 2
INVALID_URL = 3
INVALID_CONFIG = 4
BAD_HANDLE = 5
LOCK_TIMEOUT = 6
LOCK_HELD = 7
BACKEND_UNAVAILABLE = 8
CLOSED = 9
CANCELLED = 10
TERM_EXPIRED = 11
ALREADY_STARTED = 12
NOT_STARTED = 13
NAME_IN_USE = 14
BUFFER_TOO_SMALL = 15
TIMEOUT = 16
BACKEND = 17
INTERNAL = 18
FORKED = 19
PERMITS_MISMATCH = 20


class SimbaError(Exception):
    """A call of libsimba failed; status is its SIMBA_* code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class InvalidArgument(SimbaError, ValueError):
    """A bad argument: NULL, not UTF-8, a negative or too large duration."""


class InvalidName(InvalidArgument):
    """A lease name outside 1-128 characters of [A-Za-z0-9._:-], or "." or ".."."""


class InvalidURL(InvalidArgument):
    """A backend URL of a form or scheme the library cannot open."""


class InvalidConfig(InvalidArgument):
    """Lease and renew interval that do not fit together."""


class BadHandle(SimbaError):
    """A handle that is unknown, freed, or of another kind (a bug of the caller)."""


class LockTimeout(SimbaError, TimeoutError):
    """No term was won within the timeout."""


class LockHeld(SimbaError):
    """try_acquire: the lease is held, elsewhere or by this client."""


class BackendUnavailable(SimbaError, ConnectionError):
    """The backend could not be asked: an outage, not contention."""


class ClientClosed(SimbaError):
    """The client is closed."""


class Cancelled(SimbaError):
    """The cancel handle of the call was cancelled."""


class TermExpired(SimbaError):
    """The term will not stay valid as long as asked."""


class AlreadyStarted(SimbaError):
    """The election is already started on this client."""


class NotStarted(SimbaError):
    """The election is not started."""


class NameInUse(SimbaError):
    """One client uses a name both as a lock and as an election."""


class PermitsMismatch(SimbaError):
    """A semaphore is held with another number of permits than the call
    asked with."""


class Timeout(SimbaError, TimeoutError):
    """A wait (stop, step down, close, release) hit its timeout."""


class BackendError(SimbaError):
    """Another error of the backend."""


class InternalError(SimbaError):
    """A bug of the library."""


class Forked(SimbaError):
    """A call in a process forked from the one that loaded the library: the
    library cannot run there. Start the child with the multiprocessing
    start method "spawn" (or "forkserver"), or with subprocess, and open a
    new Client in it."""


_BY_STATUS = {
    INVALID_ARGUMENT: InvalidArgument,
    INVALID_NAME: InvalidName,
    INVALID_URL: InvalidURL,
    INVALID_CONFIG: InvalidConfig,
    BAD_HANDLE: BadHandle,
    LOCK_TIMEOUT: LockTimeout,
    LOCK_HELD: LockHeld,
    BACKEND_UNAVAILABLE: BackendUnavailable,
    CLOSED: ClientClosed,
    CANCELLED: Cancelled,
    TERM_EXPIRED: TermExpired,
    ALREADY_STARTED: AlreadyStarted,
    NOT_STARTED: NotStarted,
    NAME_IN_USE: NameInUse,
    TIMEOUT: Timeout,
    BACKEND: BackendError,
    INTERNAL: InternalError,
    FORKED: Forked,
    PERMITS_MISMATCH: PermitsMismatch,
}


def from_status(status: int, message: str) -> SimbaError:
    """The exception of a status code."""
    return _BY_STATUS.get(status, SimbaError)(status, message or f"status {status}")
