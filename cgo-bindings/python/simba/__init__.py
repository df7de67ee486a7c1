"""Leader election and distributed locks on PostgreSQL, MySQL/MariaDB, Redis,
Zookeeper or an in-process store, through libsimba (the engine of Simba for
Go) with ctypes.

A process opens one Client on a backend URL; the client keeps one session
alive in the background. Winning a named lease gives a Term: a fencing token
that strictly increases per name, and a validity that always ends before
the backend could hand the lease to someone else. A term is a hint, never
proof that nobody else owns the lease: send term.token with every write and
let the resource refuse lower tokens.

    with simba.Client("redis://127.0.0.1:6379/0") as client:
        with client.lock("nightly-report", timeout=5) as term:
            write(report, token=term.token)

Election callbacks run on a thread of the library, one at a time and in
order for one election; they may call the library (step down, stop, close),
and must return: while one blocks, the election's later callbacks wait.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import json
import threading
from typing import Any, Callable, Dict, Iterator, Optional

from . import _lib
from .errors import (
    AlreadyStarted,
    BackendError,
    BackendUnavailable,
    BadHandle,
    Cancelled,
    ClientClosed,
    InternalError,
    InvalidArgument,
    InvalidConfig,
    InvalidName,
    InvalidURL,
    LockHeld,
    LockTimeout,
    NameInUse,
    NotStarted,
    SimbaError,
    TermExpired,
    Timeout,
)

__all__ = [
    "Client",
    "Term",
    "Election",
    "CancelToken",
    "Reason",
    "version",
    "stats",
    "library_path",
    "SimbaError",
    "InvalidArgument",
    "InvalidName",
    "InvalidURL",
    "InvalidConfig",
    "BadHandle",
    "LockTimeout",
    "LockHeld",
    "BackendUnavailable",
    "ClientClosed",
    "Cancelled",
    "TermExpired",
    "AlreadyStarted",
    "NotStarted",
    "NameInUse",
    "Timeout",
    "BackendError",
    "InternalError",
]

__version__ = "0.1.0"

DEFAULT_WAIT = 10.0  # seconds the close, stop and release calls wait by default


class Reason(enum.IntEnum):
    """Why a term ended."""

    NOT_REVOKED = 0
    STOPPED = 1
    STEPPED_DOWN = 2
    DEADLINE_PASSED = 3
    SESSION_EXPIRED = 4
    TAKEN_OVER = 5


def version() -> str:
    """The version of the loaded libsimba."""
    return _lib.lib().simba_version().decode()


def library_path() -> str:
    """Where libsimba.so is loaded from: $SIMBA_LIBRARY or this package's directory."""
    return _lib.library_path()


def stats() -> Dict[str, int]:
    """Live handles of each kind and goroutines of the library (for leak checks)."""
    s = _lib.Stats()
    _lib.check(_lib.lib().simba_stats_get(ctypes.byref(s)))
    return {name: getattr(s, name) for name, _ in _lib.Stats._fields_}


class CancelToken:
    """Cancels blocking acquisitions from another thread: pass it as cancel=
    and call cancel(). A cancelled token stays cancelled."""

    def __init__(self) -> None:
        h = _lib.handle()
        _lib.check(_lib.lib().simba_cancel_new(ctypes.byref(h)))
        self._h = h.value

    def cancel(self) -> None:
        _lib.check(_lib.lib().simba_cancel(self._h))

    def close(self) -> None:
        """Frees the token (it cancels it first); idempotent."""
        if self._h:
            h, self._h = self._h, 0
            _lib.check(_lib.lib().simba_cancel_free(h))

    def __enter__(self) -> "CancelToken":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Term:
    """One period of ownership of a lease: a fencing token and a validity.

    A lock's term is released by release() or close() (or the with block
    that gave it); an election's term ends through the election."""

    def __init__(self, client: "Client", name: str, h: int, token: int, lock: bool) -> None:
        self._client = client
        self._h = h
        self._lock = lock
        self._freed = False
        self.name = name
        self.token = token  #: the fencing token: > 0, strictly increasing across terms of a name

    def _handle(self) -> Optional[int]:
        """The handle, or None when it is gone (freed, revoked, client closed)."""
        if self._freed or self._client.closed:
            return None
        return self._h

    def _query(self, fn: Callable[..., int], out: Any) -> Any:
        h = self._handle()
        if h is None:
            return None
        try:
            _lib.check(fn(h, ctypes.byref(out)))
        except BadHandle:
            return None  # an election's term, freed after its revoked callback
        return out.value

    @property
    def valid(self) -> bool:
        """True while the term lasts; once False, False for good."""
        v = self._query(_lib.lib().simba_term_valid, ctypes.c_int())
        return bool(v)

    @property
    def remaining(self) -> float:
        """Seconds to the term's local deadline, 0.0 once it ended."""
        ms = self._query(_lib.lib().simba_term_remaining_ms, ctypes.c_int64())
        return (ms or 0) / 1000.0

    @property
    def reason(self) -> Reason:
        """Why the term ended; NOT_REVOKED while it lasts, STOPPED once its handle is gone."""
        r = self._query(_lib.lib().simba_term_reason, ctypes.c_int32())
        return Reason.STOPPED if r is None else Reason(r)

    def ensure_valid(self, min_remaining: float = 0.0) -> None:
        """Raises TermExpired unless the term stays valid for more than min_remaining seconds."""
        ms = _lib.millis("min_remaining", min_remaining)
        h = self._handle()
        if h is None:
            raise TermExpired(11, f"term {self.token} of {self.name} has ended")
        try:
            _lib.check(_lib.lib().simba_term_ensure_valid(h, ms))
        except BadHandle:
            raise TermExpired(11, f"term {self.token} of {self.name} has ended") from None

    def release(self, timeout: Optional[float] = DEFAULT_WAIT) -> None:
        """Ends a lock's term and releases the lease; idempotent, from any thread."""
        if not self._lock:
            raise InvalidArgument(1, "an election's term ends by step_down() or stop() of the election")
        h = self._handle()
        if h is None:
            return
        _lib.check(_lib.lib().simba_lock_release(h, _lib.millis("timeout", timeout)))

    def close(self) -> None:
        """Releases a lock's term if still held and frees it; idempotent."""
        if not self._lock or self._freed:
            return
        self._freed = True
        if self._client.closed:
            return  # freed with the client
        self._client._forget(self)
        _lib.check(_lib.lib().simba_term_free(self._h))

    def __enter__(self) -> "Term":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Term(name={self.name!r}, token={self.token})"


ElectedFn = Callable[["Term"], None]
RevokedFn = Callable[["Term", Reason], None]


class Election:
    """A started election: the client contends for the leadership of name and
    reports each term to the callbacks. Use Client.election() to start one."""

    def __init__(self, client: "Client", name: str, on_elected: Optional[ElectedFn], on_revoked: Optional[RevokedFn]):
        self._client = client
        self.name = name
        self._on_elected = on_elected
        self._on_revoked = on_revoked
        self._cond = threading.Condition()
        self._term: Optional[Term] = None
        self._terms: Dict[int, Term] = {}
        self.errors: list = []  #: exceptions raised by the callbacks (they cannot cross into C)
        # The C callbacks must live as long as the election.
        self._c_elected = _lib.ELECTED(self._elected)
        self._c_revoked = _lib.REVOKED(self._revoked)
        self._listener = _lib.Listener(self._c_elected, self._c_revoked, None)
        h = _lib.handle()
        client._check_open()
        _lib.check(
            _lib.lib().simba_election_start(
                client._h, _lib.c_text("name", name, InvalidName), ctypes.byref(self._listener), ctypes.byref(h)
            )
        )
        self._h = h.value
        client._elections.add(self)

    def _elected(self, _ud: Any, _el: int, term: int, token: int) -> None:
        t = Term(self._client, self.name, term, token, lock=False)
        with self._cond:
            self._terms[term] = t
            self._term = t
            self._cond.notify_all()
        if self._on_elected is not None:
            try:
                self._on_elected(t)
            except BaseException as e:  # noqa: BLE001 - nothing may unwind into C
                self.errors.append(e)

    def _revoked(self, _ud: Any, _el: int, term: int, token: int, reason: int) -> None:
        with self._cond:
            t = self._terms.pop(term, None) or Term(self._client, self.name, term, token, lock=False)
            if self._term is t:
                self._term = None
            self._cond.notify_all()
        try:
            if self._on_revoked is not None:
                self._on_revoked(t, Reason(reason))
        except BaseException as e:  # noqa: BLE001 - nothing may unwind into C
            self.errors.append(e)
        finally:
            t._freed = True

    @property
    def term(self) -> Optional[Term]:
        """The current term of this node, or None."""
        with self._cond:
            return self._term

    def wait_elected(self, timeout: Optional[float] = None) -> Term:
        """Waits until this node leads and returns the term; raises LockTimeout after timeout seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._term is not None or self._h == 0, timeout):
                raise LockTimeout(6, f"not elected for {self.name} within {timeout}s")
            if self._term is None:
                raise NotStarted(13, f"election {self.name} stopped")
            return self._term

    def step_down(self, cooldown: float = 0.0, timeout: Optional[float] = DEFAULT_WAIT) -> None:
        """Gives the current term up (STEPPED_DOWN); contends again after cooldown seconds.
        Returns after that term's on_revoked ran (unless timeout passes first)."""
        self._client._check_open()
        if not self._h:
            raise NotStarted(13, f"election {self.name} is stopped")
        _lib.check(
            _lib.lib().simba_election_step_down(
                self._h, _lib.millis("cooldown", cooldown), _lib.millis("timeout", timeout)
            )
        )

    def stop(self, timeout: Optional[float] = DEFAULT_WAIT) -> None:
        """Stops the election: the last on_revoked (STOPPED) runs before it returns. Idempotent."""
        if not self._h or self._client.closed:
            return
        h = self._h
        with self._cond:
            self._h = 0
            self._cond.notify_all()
        self._client._elections.discard(self)
        _lib.check(_lib.lib().simba_election_stop(h, _lib.millis("timeout", timeout)))

    @contextlib.contextmanager
    def leading(self, timeout: Optional[float] = None) -> Iterator[Term]:
        """Waits until this node leads (LockTimeout after timeout seconds) and
        yields the term; the election stops when the block exits. Check
        term.valid (or term.ensure_valid) before each step of the work."""
        try:
            yield self.wait_elected(timeout)
        finally:
            self.stop()

    def __enter__(self) -> "Election":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class Client:
    """A client of one backend: one session, renewed in the background.

    url: memory://NAME (this process only), redis://, rediss://,
    postgres://, mysql://, zk://HOST:PORT. lease and renew are in seconds
    (defaults 15 and lease/3); identity is shown to other nodes. Raises
    InvalidURL, InvalidConfig or BackendUnavailable (the backend did not
    answer within open_timeout seconds)."""

    def __init__(
        self,
        url: str,
        *,
        lease: Optional[float] = None,
        renew: Optional[float] = None,
        identity: Optional[str] = None,
        open_timeout: Optional[float] = None,
    ) -> None:
        self.closed = False
        self._h = 0
        self._terms: set = set()
        self._elections: set = set()
        self._mu = threading.Lock()
        opts = _lib.Options()
        opts.size = ctypes.sizeof(opts)
        opts.lease_ms = _lib.millis("lease", lease, 0)
        opts.renew_ms = _lib.millis("renew", renew, 0)
        opts.open_timeout_ms = _lib.millis("open_timeout", open_timeout, 0)
        if identity is not None:
            opts.identity = _lib.c_text("identity", identity, InvalidArgument)
        h = _lib.handle()
        _lib.check(_lib.lib().simba_client_open(_lib.c_text("url", url, InvalidURL), ctypes.byref(opts), ctypes.byref(h)))
        self._h = h.value

    def _check_open(self) -> None:
        if self.closed:
            raise ClientClosed(9, "simba: client closed")

    def _forget(self, t: Term) -> None:
        with self._mu:
            self._terms.discard(t)

    def _acquire(self, fn: Callable[..., int], name: str, timeout: Optional[float], cancel: Optional[CancelToken]) -> Term:
        self._check_open()
        c_name = _lib.c_text("name", name, InvalidName)
        h = _lib.handle()
        _lib.check(fn(self._h, c_name, _lib.millis("timeout", timeout), cancel._h if cancel else 0, ctypes.byref(h)))
        token = ctypes.c_uint64()
        _lib.check(_lib.lib().simba_term_token(h.value, ctypes.byref(token)))
        t = Term(self, name, h.value, token.value, lock=True)
        with self._mu:
            self._terms.add(t)
        return t

    def acquire(self, name: str, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None) -> Term:
        """Waits for the lock of name at most timeout seconds (None: no bound)
        and until cancel is cancelled. Raises LockTimeout, BackendUnavailable
        (the wait timed out while the backend could not be asked) or
        Cancelled; a failed acquisition never leaves the lock held."""
        return self._acquire(_lib.lib().simba_lock_acquire, name, timeout, cancel)

    def try_acquire(self, name: str, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None) -> Term:
        """One attempt: the term, or LockHeld when the lease is held."""
        return self._acquire(_lib.lib().simba_lock_try_acquire, name, timeout, cancel)

    @contextlib.contextmanager
    def lock(self, name: str, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None) -> Iterator[Term]:
        """with client.lock("job", timeout=5) as term: holds the lock for the block."""
        t = self.acquire(name, timeout, cancel)
        try:
            yield t
        finally:
            t.close()

    def election(
        self, name: str, on_elected: Optional[ElectedFn] = None, on_revoked: Optional[RevokedFn] = None
    ) -> Election:
        """Starts contending for the leadership of name; on_elected(term) and
        on_revoked(term, reason) run on a thread of the library."""
        return Election(self, name, on_elected, on_revoked)

    def snapshot(self) -> Dict[str, Any]:
        """The session and every lock and election of this client; durations in nanoseconds."""
        self._check_open()
        p = ctypes.c_void_p()
        _lib.check(_lib.lib().simba_client_snapshot(self._h, ctypes.byref(p)))
        return json.loads(_lib.take_string(p))

    def close(self, timeout: Optional[float] = DEFAULT_WAIT) -> None:
        """Stops every election, ends every term and closes the session, so
        the backend frees every lease at once. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for el in list(self._elections):
            with el._cond:
                el._h = 0
                el._cond.notify_all()
        _lib.check(_lib.lib().simba_client_close(self._h, _lib.millis("timeout", timeout)))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
