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

Client.holder(name) tells who holds a lease on any node; client.events()
is an iterator over the client's events, bounded, that reports what it
dropped; client.run_while_leader(name, work) and client.run_group(name, n,
work) run leader work and the partitions of a group on threads of the
library, once per term.

Ctrl-C interrupts a wait for a lock (acquire, try_acquire, lock) or a
leadership (wait_elected, leading) at once, and what it had won is given
back. After os.fork() the child cannot use the package (Forked): start
worker processes with the "spawn" start method and open a Client in each.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import datetime
import enum
import itertools
import json
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Set

from . import _lib
from . import errors as _errors
from .errors import (
    AlreadyStarted,
    BackendError,
    BackendUnavailable,
    BadHandle,
    Cancelled,
    ClientClosed,
    Forked,
    InternalError,
    InvalidArgument,
    InvalidConfig,
    InvalidName,
    InvalidURL,
    LockHeld,
    LockTimeout,
    NameInUse,
    NotStarted,
    PermitsMismatch,
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
    "Holder",
    "Event",
    "EventKind",
    "Events",
    "reason_name",
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
    "PermitsMismatch",
    "Forked",
    "Timeout",
    "BackendError",
    "InternalError",
]

__version__ = "0.1.0"

MAX_PERMITS = 1024  # the largest number of permits of a semaphore, SIMBA_MAX_PERMITS
DEFAULT_WAIT = 10.0  # seconds the close, stop and release calls wait by default
_SLICE = 0.05  # seconds: the longest a wait of the main thread goes without looking for Ctrl-C
_SLICE_MS = 50


class Reason(enum.IntEnum):
    """Why a term ended. It prints as its name (STOPPED), as the engine's
    logs and events do; it compares equal to its number."""

    NOT_REVOKED = 0
    STOPPED = 1
    STEPPED_DOWN = 2
    DEADLINE_PASSED = 3
    SESSION_EXPIRED = 4
    TAKEN_OVER = 5

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


def reason_name(reason: int) -> str:
    """The library's name of a revoke reason (simba_reason_name): "STOPPED",
    or "REASON_UNKNOWN" for a number simba.h does not define."""
    return _lib.lib().simba_reason_name(int(reason)).decode()


class EventKind(enum.IntEnum):
    """What an Event reports; it prints as its name."""

    SESSION_OPENED = 1  #: a new session is live; granted is its validity
    SESSION_SUSPENDED = 2  #: a keep-alive failed; error says why
    SESSION_RESTORED = 3  #: a keep-alive succeeded after failures
    SESSION_DEADLINE_PASSED = 4  #: the local deadline passed: every term revoked
    SESSION_EXPIRED = 5  #: the backend reported the session expired
    SESSION_LEASE_SHORTENED = 6  #: the backend granted less than asked; granted
    SESSION_CLOSED = 7  #: the client closed its session
    ELECTED = 8  #: a term was won; name, token, lock, waited (a lock's)
    REVOKED = 9  #: a term ended; name, token, lock, reason
    BACKEND_ERROR = 10  #: a backend call failed; error, name when about a lease
    WORK_FAILED = 11  #: leader work failed; name, token, error
    LISTENER_PANICKED = 12  #: a listener of the engine failed; name, token, error
    KEEP_ALIVE = 13  #: a keep-alive was answered or failed; latency, error
    DROPPED = 14  #: this stream fell behind and missed `dropped` events, the oldest
    BACKEND_WARNING = 15  #: the backend found a setup that weakens a guarantee; warning_code, warning_message

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


def _utc(unix_ns: int) -> Optional[datetime.datetime]:
    if not unix_ns:
        return None
    return datetime.datetime.fromtimestamp(unix_ns / 1e9, tz=datetime.timezone.utc)


def _text(p: Optional[int]) -> Optional[str]:
    return None if not p else ctypes.string_at(p).decode("utf-8", "replace")


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a lease, as the backend sees it (Client.holder)."""

    session: str  #: the holding session's id
    identity: Optional[str]  #: the identity of the client behind it (Client(identity=...)); None when unknown
    token: int  #: the fencing token of the holder's term
    since: Optional[datetime.datetime]  #: when that term began, by the backend's clock (UTC); None when unknown


@dataclasses.dataclass(frozen=True)
class Event:
    """Something that happened to a client's session or leases (Client.events).
    Fields that do not apply to the kind are None, 0 or False."""

    kind: EventKind
    time: Optional[datetime.datetime]  #: when it happened (UTC)
    session: Optional[str] = None
    name: Optional[str] = None  #: the lease
    token: int = 0  #: the term's token
    reason: Reason = Reason.NOT_REVOKED  #: REVOKED: why the term ended
    lock: bool = False  #: ELECTED, REVOKED: a lock's term rather than an election's
    granted: float = 0.0  #: seconds of validity granted (SESSION_OPENED, SESSION_LEASE_SHORTENED)
    latency: float = 0.0  #: KEEP_ALIVE: seconds the call took
    waited: float = 0.0  #: ELECTED of a lock: seconds the winning acquisition waited
    dropped: int = 0  #: DROPPED: the events this stream missed since the last DROPPED
    error: Optional[str] = None
    warning_code: Optional[str] = None
    warning_message: Optional[str] = None

    def __str__(self) -> str:
        parts = [self.kind.name]
        if self.name:
            parts.append(f"name={self.name} token={self.token}")
        if self.lock:
            parts.append("lock")
        if self.reason != Reason.NOT_REVOKED:
            parts.append(f"reason={self.reason.name}")
        if self.dropped:
            parts.append(f"dropped={self.dropped}")
        if self.warning_code:
            parts.append(f"warning={self.warning_code}: {self.warning_message}")
        if self.error:
            parts.append(f"error={self.error}")
        return " ".join(parts)

    @classmethod
    def _of(cls, e: "_lib.Event") -> "Event":
        try:
            kind: Any = EventKind(e.kind)
        except ValueError:
            kind = e.kind  # a kind of a newer library
        try:
            reason = Reason(e.reason)
        except ValueError:
            reason = e.reason
        return cls(
            kind=kind,
            time=_utc(e.time_unix_ns),
            session=_text(e.session),
            name=_text(e.name),
            token=e.token,
            reason=reason,
            lock=bool(e.lock),
            granted=e.granted_ns / 1e9,
            latency=e.latency_ns / 1e9,
            waited=e.waited_ns / 1e9,
            dropped=e.dropped,
            error=_text(e.error),
            warning_code=_text(e.warning_code),
            warning_message=_text(e.warning_message),
        )


def version() -> str:
    """The version of the loaded libsimba."""
    return _lib.lib().simba_version().decode()


def library_path() -> str:
    """Where libsimba.so is loaded from: $SIMBA_LIBRARY or this package's directory."""
    return _lib.library_path()


def stats() -> Dict[str, int]:
    """Live handles of each kind and goroutines of the library (for leak checks)."""
    _lib.check_fork()
    s = _lib.Stats()
    _lib.check(_lib.lib().simba_stats_get(ctypes.byref(s)))
    counts = {name: getattr(s, name) for name, _ in _lib.Stats._fields_}
    streams = ctypes.c_int64()
    _lib.check(_lib.lib().simba_stats_events(ctypes.byref(streams)))
    counts["events"] = streams.value
    return counts


class CancelToken:
    """Cancels blocking acquisitions from another thread: pass it as cancel=
    and call cancel(). A cancelled token stays cancelled; a closed one is
    cancelled, and a call given it raises Cancelled. A token dropped without
    close() is freed when it is collected."""

    def __init__(self) -> None:
        _lib.check_fork()
        h = _lib.handle()
        _lib.check(_lib.lib().simba_cancel_new(ctypes.byref(h)))
        self._h = h.value
        self._mu = threading.Lock()
        self._cancelled = False
        self._linked: Set[int] = set()  # cancel handles of the waits that also end with this token
        self._finalizer = weakref.finalize(self, _lib.lib().simba_cancel_free, self._h)
        self._finalizer.atexit = False

    def cancel(self) -> None:
        with self._mu:
            self._cancelled = True
            linked = list(self._linked)
        _lib.check(_lib.lib().simba_cancel(self._h))
        for h in linked:
            _lib.lib().simba_cancel(h)

    def _link(self, h: int) -> None:
        """Cancels the cancel handle h with this token, now if it is cancelled."""
        with self._mu:
            self._linked.add(h)
            cancelled = self._cancelled
        if cancelled:
            _lib.lib().simba_cancel(h)

    def _unlink(self, h: int) -> None:
        with self._mu:
            self._linked.discard(h)

    def _handle(self) -> int:
        """The handle to pass to the library; raises Cancelled once the token
        is closed, which cancelled it."""
        h = self._h
        if not h:
            raise Cancelled(_errors.CANCELLED, "simba: the cancel token is closed, and a closed token is cancelled")
        return h

    def close(self) -> None:
        """Frees the token (it cancels it first, with the waits given it);
        idempotent."""
        with self._mu:
            self._cancelled = True
            self._h = 0
            for h in self._linked:
                _lib.lib().simba_cancel(h)
        st = self._finalizer()  # simba_cancel_free, once; None after the first
        if st:
            _lib.check(st)

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
        if lock:
            # Bound now, so that close() reaches C with no Python frame
            # before the free, where a Ctrl-C could land and skip it. A
            # lock's term dropped without close() is released when it is
            # collected; at the interpreter's exit its client's close ends
            # it, within that close's bound.
            self._free = _lib.lib().simba_term_free
            self._finalizer = weakref.finalize(self, self._free, h)
            self._finalizer.atexit = False

    def _handle(self) -> Optional[int]:
        """The handle, or None when it is gone (freed, revoked, client closed)."""
        if self._freed or self._client.closed:
            return None
        return self._h

    def _query(self, fn: Callable[..., int], out: Any) -> Any:
        _lib.check_fork()
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
        """True while the term lasts; once False, False for good. Raises
        Forked in a forked child: no term is valid there."""
        _lib.check_fork()
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
        if min_remaining is None:
            raise TypeError("min_remaining must be a number of seconds (0: any time left), not None")
        ms = _lib.millis("min_remaining", min_remaining)
        _lib.check_fork()
        h = self._handle()
        if h is None:
            raise TermExpired(11, f"term {self.token} of {self.name} has ended")
        try:
            _lib.check(_lib.lib().simba_term_ensure_valid(h, ms))
        except BadHandle:
            raise TermExpired(11, f"term {self.token} of {self.name} has ended") from None

    def wait_ended(self, timeout: Optional[float] = None) -> bool:
        """Waits at most timeout seconds (None: no bound) for the term to end;
        True once it ended, False while it lasts. Leader work sleeps with it
        between steps (term.wait_ended(5) instead of time.sleep(5)) and
        wakes when its term ends. Ctrl-C interrupts it on the main thread."""
        _lib.check_fork()
        ms = _lib.millis("timeout", timeout)
        deadline = None if ms == _lib.NO_TIMEOUT else time.monotonic() + ms / 1000
        main = threading.current_thread() is threading.main_thread()
        while True:
            h = self._handle()
            if h is None:
                return True
            wait = ms
            if deadline is not None:
                wait = max(int((deadline - time.monotonic()) * 1000), 0)
            if main and (wait == _lib.NO_TIMEOUT or wait > _SLICE_MS):
                wait = _SLICE_MS  # slices: Ctrl-C is seen between two
            st = _lib.lib().simba_term_wait_end(h, wait)
            if st == 0 or st == _errors.BAD_HANDLE:
                return True
            if st != _errors.TIMEOUT:
                _lib.check(st)
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def release(self, timeout: Optional[float] = DEFAULT_WAIT) -> None:
        """Ends a lock's term, releases the lease, waiting for the backend's
        answer at most timeout seconds, and frees the term's handle (as
        close() does; token and name stay readable). Idempotent, from any
        thread. When it raises (Timeout, BackendError) the handle stays
        until close()."""
        if not self._lock:
            raise InvalidArgument(1, "an election's term ends by step_down() or stop() of the election")
        _lib.check_fork()
        h = self._handle()
        if h is None:
            return
        _lib.check(_lib.lib().simba_lock_release(h, _lib.millis("timeout", timeout)))
        self.close()

    def close(self) -> None:
        """Releases a lock's term if still held and frees it; idempotent."""
        if self._freed or not self._lock:
            return
        self._settle(self._free(self._h))  # the free first: nothing before it can be interrupted

    def _settle(self, st: int) -> None:
        """The bookkeeping after simba_term_free of this term returned st."""
        self._freed = True
        self._finalizer.detach()
        self._client._forget(self)
        if st == _errors.FORKED:
            _lib.check_fork()
        if st not in (0, _errors.BAD_HANDLE):  # BAD_HANDLE: freed with its client
            _lib.check(st)

    def __enter__(self) -> "Term":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Term(name={self.name!r}, token={self.token})"


ElectedFn = Callable[["Term"], None]
RevokedFn = Callable[["Term", Reason], None]


# Every election reaches its Python object through one set of C callbacks
# that live as long as the module, and a key in user_data: the library
# calls release with that key after the election's last callback returned,
# and only then is the object let go. Nothing C calls can be freed before
# (an Election dropped after a stop that timed out, then collected).
_live: Dict[int, "Election"] = {}
_live_mu = threading.Lock()
_keys = itertools.count(1)


def _election_of(key: Optional[int]) -> Optional["Election"]:
    with _live_mu:
        return _live.get(key or 0)


@_lib.ELECTED
def _c_elected(key: Optional[int], _el: int, term: int, token: int) -> None:
    el = _election_of(key)
    if el is not None:
        el._elected(term, token)


@_lib.REVOKED
def _c_revoked(key: Optional[int], _el: int, term: int, token: int, reason: int) -> None:
    el = _election_of(key)
    if el is not None:
        el._revoked(term, token, reason)


@_lib.RELEASE
def _c_release(key: Optional[int]) -> None:
    with _live_mu:
        el = _live.pop(key or 0, None)
    if el is not None:
        el._released.set()


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
        self._released = threading.Event()  # set after the last callback returned
        self.errors: list = []  #: exceptions raised by the callbacks (they cannot cross into C)
        self._h = 0
        _lib.check_fork()
        client._check_open()
        c_name = _lib.c_text("name", name, InvalidName)
        key = next(_keys)
        listener = _lib.Listener(_c_elected, _c_revoked, key)
        lib = _lib.lib()
        h = _lib.handle(0)
        try:
            with _live_mu:
                _live[key] = self
            _lib.check(
                lib.simba_election_start_ex(client._h, c_name, ctypes.byref(listener), _c_release, ctypes.byref(h))
            )
            self._h = h.value
            client._elections.add(self)
        except BaseException:
            if h.value:
                # Started, and interrupted before it was handed over (a
                # Ctrl-C right after the start returned): stop it without
                # waiting. Its release callback drops the _live entry.
                self._h = 0
                client._elections.discard(self)
                lib.simba_election_stop(h.value, 0)
            else:
                with _live_mu:
                    _live.pop(key, None)
            raise

    def _elected(self, term: int, token: int) -> None:
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

    def _revoked(self, term: int, token: int, reason: int) -> None:
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
        _lib.check_fork()
        with self._cond:
            return self._term

    def wait_elected(self, timeout: Optional[float] = None) -> Term:
        """Waits until this node leads and returns the term; raises LockTimeout after timeout seconds.
        Ctrl-C (KeyboardInterrupt) interrupts the wait at once."""
        _lib.check_fork()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._term is None and self._h != 0:
                left = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
                if left <= 0:
                    break
                self._cond.wait(left)  # in slices, for Ctrl-C
            if self._term is None and self._h != 0:
                raise LockTimeout(6, f"not elected for {self.name} within {timeout}s")
            if self._term is None:
                raise NotStarted(13, f"election {self.name} stopped")
            return self._term

    def step_down(self, cooldown: float = 0.0, timeout: Optional[float] = DEFAULT_WAIT) -> None:
        """Gives the current term up (STEPPED_DOWN); contends again after cooldown seconds.
        Returns after that term's on_revoked ran (unless timeout passes first)."""
        _lib.check_fork()
        self._client._check_open()
        if not self._h:
            raise NotStarted(13, f"election {self.name} is stopped")
        _lib.check(
            _lib.lib().simba_election_step_down(
                self._h, _lib.millis("cooldown", cooldown), _lib.millis("timeout", timeout)
            )
        )

    def stop(self, timeout: Optional[float] = DEFAULT_WAIT) -> None:
        """Stops the election: the last on_revoked (STOPPED) runs before it
        returns, and no callback after it. Idempotent. Past timeout seconds
        it raises Timeout and the stop goes on in the background: callbacks
        may come until it ended (wait_released tells when); a timeout of 0
        does not wait (Timeout unless already done). Called from a
        callback, it returns at once, and only the on_revoked of the term of
        that callback follows."""
        _lib.check_fork()
        if self._client.closed:
            return
        with self._cond:
            h, self._h = self._h, 0  # under _cond: of two stops at once, one stops
            if not h:
                return
            self._cond.notify_all()
        self._client._elections.discard(self)
        _lib.check(_lib.lib().simba_election_stop(h, _lib.millis("timeout", timeout)))

    def wait_released(self, timeout: Optional[float] = None) -> bool:
        """Waits until the election's last callback returned, after a stop or
        the client's close; False when timeout seconds passed first."""
        return self._released.wait(timeout)

    @contextlib.contextmanager
    def leading(self, timeout: Optional[float] = None) -> Iterator[Term]:
        """Waits until this node leads (LockTimeout after timeout seconds) and
        yields the term; the election stops when the block exits. Check
        term.valid (or term.ensure_valid) before each step of the work."""
        try:
            yield self.wait_elected(timeout)
        except BaseException as e:
            self._stop_after_block(interrupted=not isinstance(e, Exception))
            raise
        self._stop_after_block(interrupted=False)

    def _stop_after_block(self, interrupted: bool) -> None:
        """The stop at the end of a with block. On the main thread it never
        blocks in C: the stop goes on in the background while this waits
        for its end in slices, where Ctrl-C reaches it; after a Ctrl-C
        (interrupted) it does not wait at all, and the release finishes
        in the background (wait_released tells when)."""
        if threading.current_thread() is not threading.main_thread():
            try:
                self.stop(timeout=0 if interrupted else DEFAULT_WAIT)
            except Timeout:
                if not interrupted:
                    raise
            return
        _lib.check_fork()
        if not self._h or self._client.closed:
            return
        try:
            self.stop(timeout=0)
        except Timeout:
            pass  # not done yet: it goes on in the background
        if interrupted:
            return
        deadline = time.monotonic() + DEFAULT_WAIT
        while not self._released.wait(_SLICE):
            if time.monotonic() >= deadline:
                raise Timeout(
                    _errors.TIMEOUT, f"stop election {self.name}: not done within {DEFAULT_WAIT}s, it goes on in the background"
                )

    def __enter__(self) -> "Election":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self._stop_after_block(interrupted=exc_type is not None and not issubclass(exc_type, Exception))


class Events:
    """A stream of a client's events (Client.events): iterate over it, or
    call get(timeout). It keeps at most capacity events for its reader; the
    engine never waits for it, and when the reader falls that far behind
    the oldest events are dropped and the reader gets an Event of kind
    DROPPED, with their count, before the next one. After the client's
    close the stream gives its last events (SESSION_CLOSED among them),
    then the iteration ends. close() (or the with block) frees it."""

    def __init__(self, client: "Client", capacity: int) -> None:
        _lib.check_fork()
        client._check_open()
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError(f"capacity must be an int, not {type(capacity).__name__}")
        if not 0 <= capacity <= 2**31 - 1:
            raise InvalidArgument(_errors.INVALID_ARGUMENT, f"event capacity {capacity}: want 1 to 1048576 (0: 1024)")
        h = _lib.handle()
        _lib.check(_lib.lib().simba_events_subscribe(client._h, capacity, ctypes.byref(h)))
        self._h = h.value
        self._ended = False
        self._dropped_at_close = 0
        self._finalizer = weakref.finalize(self, _lib.lib().simba_events_free, self._h)
        self._finalizer.atexit = False

    def get(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event, waiting at most timeout seconds (None: until one
        comes; 0: no wait); None when none came. Raises ClientClosed once
        the client is closed and every event was read. Ctrl-C interrupts the
        wait on the main thread."""
        _lib.check_fork()
        if self._ended or not self._h:
            raise ClientClosed(_errors.CLOSED, "simba: the event stream has ended")
        ms = _lib.millis("timeout", timeout)
        deadline = None if ms == _lib.NO_TIMEOUT else time.monotonic() + ms / 1000
        main = threading.current_thread() is threading.main_thread()
        lib = _lib.lib()
        while True:
            wait = ms
            if deadline is not None:
                wait = max(int((deadline - time.monotonic()) * 1000), 0)
            if main and (wait == _lib.NO_TIMEOUT or wait > _SLICE_MS):
                wait = _SLICE_MS  # slices: Ctrl-C is seen between two
            e = _lib.Event()
            e.size = ctypes.sizeof(e)
            st = lib.simba_events_next(self._h, wait, ctypes.byref(e))
            if st == 0:
                try:
                    return Event._of(e)
                finally:
                    lib.simba_event_clear(ctypes.byref(e))
            if st in (_errors.CLOSED, _errors.BAD_HANDLE):
                message = _lib.last_error()
                self.close()
                raise ClientClosed(_errors.CLOSED, message)
            if st != _errors.TIMEOUT:
                _lib.check(st)
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def __iter__(self) -> "Events":
        return self

    def __next__(self) -> Event:
        try:
            e = self.get()
        except ClientClosed:
            raise StopIteration from None
        assert e is not None  # a wait without timeout
        return e

    @property
    def dropped(self) -> int:
        """How many events this stream dropped since it was opened."""
        _lib.check_fork()
        if not self._h:
            return self._dropped_at_close
        n = ctypes.c_uint64()
        _lib.check(_lib.lib().simba_events_dropped(self._h, ctypes.byref(n)))
        return n.value

    def close(self) -> None:
        """Ends the subscription and frees it; idempotent. A get() waiting
        on another thread raises ClientClosed."""
        if not self._h:
            return
        n = ctypes.c_uint64()
        lib = _lib.lib()
        if lib.simba_events_dropped(self._h, ctypes.byref(n)) != 0:
            n.value = 0
        self._dropped_at_close = n.value
        self._ended = True
        self._h = 0
        self._finalizer()  # simba_events_free, once

    def __enter__(self) -> "Events":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _run_interruptibly(
    call: Callable[[int], int], cancel: Optional[CancelToken], what: str, wait_on_interrupt: bool = True
) -> None:
    """Runs call(cancel handle), a blocking call of the library that ends
    when its cancel handle is cancelled, and raises its error. On the main
    thread the call runs on a thread of its own while this one waits in
    slices, where Ctrl-C reaches it: KeyboardInterrupt cancels the call and,
    with wait_on_interrupt, waits for it to return (at most DEFAULT_WAIT; a
    second Ctrl-C stops the wait) before it propagates. A call that holds
    nothing (a question to the backend) is not waited for: a driver may
    answer a cancel only at its own deadline."""
    lib = _lib.lib()
    cancel_h = cancel._handle() if cancel else 0
    if threading.current_thread() is not threading.main_thread():
        st = call(cancel_h)
        _lib.check(st)
        return
    own = _lib.handle(0)
    _lib.check(lib.simba_cancel_new(ctypes.byref(own)))
    outcome: Dict[str, Any] = {}
    done = threading.Event()
    mu = threading.Lock()

    def run() -> None:
        st = call(own.value)
        with mu:
            outcome.update(st=st, message=_lib.last_error() if st != 0 else "")
            abandoned = outcome.get("abandoned", False)
            done.set()
        if abandoned:
            lib.simba_cancel_free(own.value)

    if cancel is not None:
        cancel._link(own.value)
    runner = threading.Thread(target=run, name=f"simba-{what}", daemon=True)
    try:
        runner.start()
        while not done.wait(_SLICE):
            pass
    except BaseException:
        lib.simba_cancel(own.value)
        try:
            if wait_on_interrupt:
                done.wait(DEFAULT_WAIT)
        finally:
            if cancel is not None:
                cancel._unlink(own.value)
            with mu:
                finished = done.is_set()
                if not finished:
                    outcome["abandoned"] = True  # the runner frees the cancel handle when the call returns
            if finished:
                lib.simba_cancel_free(own.value)
        raise
    if cancel is not None:
        cancel._unlink(own.value)
    lib.simba_cancel_free(own.value)
    err = _lib.error_of(outcome["st"], outcome["message"])
    if err is not None:
        raise err


class _WorkCalls:
    """The Python side of one run of leader work: the Term of each call, and
    the exceptions the work raised while its term lasted (a failure that
    ends the run) or after (an interrupted work, which the run ignores)."""

    def __init__(self, client: "Client", name: str) -> None:
        self.client = client
        self.name = name
        self.failures: List[BaseException] = []

    def call(self, name: str, term: int, token: int, fn: Callable[["Term"], None]) -> int:
        t = Term(self.client, name, term, token, lock=False)
        try:
            fn(t)
            return 0
        except BaseException as e:  # noqa: BLE001 - nothing may unwind into C
            if t.valid:
                self.failures.append(e)
            st = getattr(e, "status", 0)
            return st if isinstance(e, SimbaError) and st else _errors.BACKEND
        finally:
            t._freed = True  # the library frees the handle when the work returns

    def raise_failure(self, err: SimbaError) -> None:
        """Raises the work's own exception for the failure err of the run."""
        if self.failures:
            raise self.failures[0] from None
        raise err


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
        _lib.check_fork()
        self.closed = False
        self._h = 0
        self._terms: "weakref.WeakSet[Term]" = weakref.WeakSet()  # a lost Term is released when collected
        self._elections: set = set()
        self._mu = threading.Lock()
        opts = _lib.Options()
        opts.size = ctypes.sizeof(opts)
        opts.lease_ms = _lib.millis("lease", lease, 0, wait=False)
        opts.renew_ms = _lib.millis("renew", renew, 0, wait=False)
        opts.open_timeout_ms = _lib.millis("open_timeout", open_timeout, 0)
        if identity is not None:
            opts.identity = _lib.c_text("identity", identity, InvalidArgument)
        h = _lib.handle()
        _lib.check(_lib.lib().simba_client_open(_lib.c_text("url", url, InvalidURL), ctypes.byref(opts), ctypes.byref(h)))
        self._h = h.value
        # A client dropped without close() is closed when it is collected,
        # without waiting: the close goes on in the background.
        self._finalizer = weakref.finalize(self, _lib.lib().simba_client_close, self._h, 0)
        self._finalizer.atexit = False
        _open_clients.add(self)

    def _check_open(self) -> None:
        _lib.check_fork()
        if self.closed:
            raise ClientClosed(9, "simba: client closed")

    def _forget(self, t: Term) -> None:
        with self._mu:
            self._terms.discard(t)

    def _acquire(
        self, fn: Callable[..., int], name: str, timeout: Optional[float], cancel: Optional[CancelToken], wait: bool
    ) -> Term:
        self._check_open()
        c_name = _lib.c_text("name", name, InvalidName)
        ms = _lib.millis("timeout", timeout)
        cancel_h = cancel._handle() if cancel else 0
        if 0 < ms <= _SLICE_MS or threading.current_thread() is not threading.main_thread():
            # A call bounded by one slice returns soon enough to see a
            # Ctrl-C, and only the main thread gets KeyboardInterrupt: wait
            # in C, here.
            return self._acquire_here(fn, name, c_name, ms, cancel_h)
        if wait and ms == 0:
            # One attempt, bounded in C by a lease duration: a slice of it
            # would be a wait of 50 ms instead.
            return self._acquire_interruptibly(fn, name, c_name, ms, cancel)
        # Most calls end within a slice (the lock is free, or a try is
        # answered): make one slice of it here, and only then wait in a
        # thread of its own (a try whose answer is late makes its attempt
        # again there; one that timed out never left the lock held).
        lib = _lib.lib()
        start = time.monotonic()
        h = _lib.handle(0)
        try:
            st = fn(self._h, c_name, _SLICE_MS, cancel_h, ctypes.byref(h))
            if st == 0:
                return self._term_of(name, h.value)
            err = _lib.error_of(st, _lib.last_error())
        except BaseException:
            if h.value:
                lib.simba_term_free(h.value)  # won in the instant of an interrupt
            raise
        if st not in (_errors.LOCK_TIMEOUT, _errors.BACKEND_UNAVAILABLE):
            raise err  # type: ignore[misc]
        if ms > 0:
            ms -= int((time.monotonic() - start) * 1000)
            if ms <= 0:
                raise err  # type: ignore[misc]
        return self._acquire_interruptibly(fn, name, c_name, ms, cancel)

    def _acquire_here(self, fn: Callable[..., int], name: str, c_name: bytes, ms: int, cancel_h: int) -> Term:
        lib = _lib.lib()
        h = _lib.handle(0)
        try:
            _lib.check(fn(self._h, c_name, ms, cancel_h, ctypes.byref(h)))
            return self._term_of(name, h.value)
        except BaseException:
            if h.value:
                lib.simba_term_free(h.value)  # releases; a second free of a freed handle is harmless
            raise

    def _acquire_interruptibly(
        self, fn: Callable[..., int], name: str, c_name: bytes, ms: int, cancel: Optional[CancelToken]
    ) -> Term:
        """Waits in a thread of its own while the main thread waits for it in
        Python, where Ctrl-C reaches it: KeyboardInterrupt cancels the wait
        through a cancel handle of its own, and a term won meanwhile, even in
        the same instant, is released (R-LOCK-2)."""
        lib = _lib.lib()
        own = _lib.handle(0)
        outcome: Dict[str, Any] = {}
        mu = threading.Lock()
        done = threading.Event()

        def wait() -> None:
            h = _lib.handle(0)
            st = fn(self._h, c_name, ms, own.value, ctypes.byref(h))
            message = _lib.last_error() if st != 0 else ""
            with mu:
                outcome.update(st=st, h=h.value, message=message)
                abandoned = outcome.get("abandoned", False)
            if abandoned:
                # The caller is gone (KeyboardInterrupt): nothing may stay held.
                if st == 0:
                    lib.simba_term_free(h.value)  # releases the lease and frees the handle
                lib.simba_cancel_free(own.value)
            done.set()

        waiter = threading.Thread(target=wait, name=f"simba-acquire-{name}", daemon=True)
        cancel_freed = False
        try:
            _lib.check(lib.simba_cancel_new(ctypes.byref(own)))
            if cancel is not None:
                cancel._link(own.value)
            waiter.start()
            # Slices: a SIGINT that lands on another thread is still seen
            # here within one.
            while not done.wait(_SLICE):
                pass
            # The wait ended and its outcome is this thread's: everything
            # but the term is let go before the Term is built, so that the
            # building is the last step that can be interrupted.
            lib.simba_cancel_free(own.value)
            cancel_freed = True
            if cancel is not None:
                cancel._unlink(own.value)
            if outcome["st"] != 0:
                raise _lib.error_of(outcome["st"], outcome["message"])  # type: ignore[misc]
            return self._term_of(name, outcome["h"])
        except BaseException:
            abandoned = False
            with mu:
                running = "st" not in outcome and waiter.is_alive()
            if running:
                # Interrupted: cancel the wait; what it wins is given back
                # here if it ends soon, else by its thread when it ends.
                lib.simba_cancel(own.value)
                done.wait(0.05)
                with mu:
                    abandoned = "st" not in outcome
                    if abandoned:
                        outcome["abandoned"] = True
            if not abandoned:
                if outcome.get("st") == 0:
                    lib.simba_term_free(outcome["h"])  # won in the instant of the interrupt
                if own.value and not cancel_freed:
                    lib.simba_cancel_free(own.value)
                    if cancel is not None:
                        cancel._unlink(own.value)
            raise

    def _term_of(self, name: str, h: int) -> Term:
        """The Term of a won lock handle; a failure frees the handle, which releases the lock."""
        lib = _lib.lib()
        try:
            token = ctypes.c_uint64()
            _lib.check(_lib.lib().simba_term_token(h, ctypes.byref(token)))
            t = Term(self, name, h, token.value, lock=True)
            with self._mu:
                self._terms.add(t)
        except BaseException:
            lib.simba_term_free(h)
            raise
        return t

    def acquire(self, name: str, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None) -> Term:
        """Waits for the lock of name at most timeout seconds (None: no bound)
        and until cancel is cancelled. Raises LockTimeout, BackendUnavailable
        (the wait timed out while the backend could not be asked) or
        Cancelled; a failed acquisition never leaves the lock held."""
        return self._acquire(_lib.lib().simba_lock_acquire, name, timeout, cancel, wait=True)

    def try_acquire(self, name: str, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None) -> Term:
        """One attempt: the term, or LockHeld when the lease is held."""
        return self._acquire(_lib.lib().simba_lock_try_acquire, name, timeout, cancel, wait=False)

    @contextlib.contextmanager
    def lock(self, name: str, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None) -> Iterator[Term]:
        """with client.lock("job", timeout=5) as term: holds the lock for the block."""
        t = self.acquire(name, timeout, cancel)
        try:
            yield t
        finally:
            if not t._freed:
                # The bound free first, with no Python frame before it
                # where a Ctrl-C could land and skip it.
                t._settle(t._free(t._h))

    def _permit_fn(self, c_fn: Callable[..., int], permits: int) -> Callable[..., int]:
        """The lock-shaped call of a semaphore function: permits checked
        here, where a Python int could not pass through an int32_t."""
        if isinstance(permits, bool) or not isinstance(permits, int) or not 1 <= permits <= MAX_PERMITS:
            raise InvalidArgument(_errors.INVALID_ARGUMENT, f"permits {permits!r}: want an int from 1 to {MAX_PERMITS}")

        def fn(client: int, c_name: bytes, ms: int, cancel_h: int, out: Any) -> int:
            return c_fn(client, c_name, permits, ms, cancel_h, out)

        return fn

    def acquire_permit(
        self, name: str, permits: int, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None
    ) -> Term:
        """Waits for one of the permits permits of the semaphore name, with
        the timeout, cancel and errors of acquire: up to permits terms of
        the name are held at once across every client, each with a fencing
        token that strictly increases per semaphore name. Every holder must
        ask with the same permits (1 to MAX_PERMITS, else InvalidArgument):
        while permits granted under another number are held, it raises
        PermitsMismatch. The Term is a lock term of the slot's lease; its
        name is the semaphore's."""
        fn = self._permit_fn(_lib.lib().simba_semaphore_acquire, permits)
        return self._acquire(fn, name, timeout, cancel, wait=True)

    def try_acquire_permit(
        self, name: str, permits: int, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None
    ) -> Term:
        """One attempt at each permit: the term, or LockHeld when all are held."""
        fn = self._permit_fn(_lib.lib().simba_semaphore_try_acquire, permits)
        return self._acquire(fn, name, timeout, cancel, wait=False)

    @contextlib.contextmanager
    def semaphore(
        self, name: str, permits: int, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None
    ) -> Iterator[Term]:
        """with client.semaphore("pool", 3, timeout=5) as term: holds one of
        the 3 permits of pool for the block."""
        t = self.acquire_permit(name, permits, timeout, cancel)
        try:
            yield t
        finally:
            if not t._freed:
                t._settle(t._free(t._h))

    def election(
        self, name: str, on_elected: Optional[ElectedFn] = None, on_revoked: Optional[RevokedFn] = None
    ) -> Election:
        """Starts contending for the leadership of name; on_elected(term) and
        on_revoked(term, reason) run on a thread of the library."""
        return Election(self, name, on_elected, on_revoked)

    def holder(self, name: str, timeout: Optional[float] = None, cancel: Optional[CancelToken] = None) -> Optional[Holder]:
        """Asks the backend who holds the lease name now, on any node, this
        one included: a Holder, or None when nobody holds it. The answer is
        awaited at most one renew interval, timeout seconds and until cancel
        is cancelled. Raises InvalidName, BackendUnavailable, Timeout or
        Cancelled; Ctrl-C interrupts it on the main thread."""
        self._check_open()
        c_name = _lib.c_text("name", name, InvalidName)
        ms = _lib.millis("timeout", timeout)
        held = ctypes.c_int()
        out = _lib.Holder()
        out.size = ctypes.sizeof(out)
        lib = _lib.lib()

        mu = threading.Lock()
        state = {"answered": False, "abandoned": False}

        def call(cancel_h: int) -> int:
            st = lib.simba_lease_holder(self._h, c_name, ms, cancel_h, ctypes.byref(held), ctypes.byref(out))
            with mu:
                state["answered"] = True
                abandoned = state["abandoned"]
            if abandoned:  # the caller left on a Ctrl-C: nobody reads out
                lib.simba_holder_clear(ctypes.byref(out))
            return st

        try:
            _run_interruptibly(call, cancel, "holder", wait_on_interrupt=False)
            if not held.value:
                return None
            return Holder(
                session=_text(out.session) or "",
                identity=_text(out.identity),
                token=out.token,
                since=_utc(out.since_unix_ns),
            )
        finally:
            with mu:
                answered = state["answered"]
                state["abandoned"] = not answered  # then the call clears out when it returns
            if answered:
                lib.simba_holder_clear(ctypes.byref(out))

    def events(self, capacity: int = 0) -> Events:
        """Opens a stream of this client's events from now on, keeping at most
        capacity of them for its reader (0: 1024). Iterate over it on a
        thread of its own: for event in client.events(): ..."""
        return Events(self, capacity)

    def run_while_leader(
        self,
        name: str,
        work: Callable[[Term], None],
        timeout: Optional[float] = None,
        cancel: Optional[CancelToken] = None,
    ) -> None:
        """Contends for the leadership of name and runs work(term) once per
        term won, on a thread of the library, until timeout seconds passed
        or cancel is cancelled (it returns), work returns while its term
        lasts (the work is over: it returns; an exception of work is raised
        here), or the client is closed (ClientClosed). work must check
        term.valid (or term.ensure_valid, term.wait_ended) and return soon
        after the term ended: its lease is released once it returned, or at
        the term's local deadline. Work interrupted because its term ended
        runs again on the next term. The election always stops with the
        ordered handover before this returns. Ctrl-C stops it, after work
        returned."""
        self._check_open()
        c_name = _lib.c_text("name", name, InvalidName)
        if not callable(work):
            raise TypeError("work must be callable")
        ms = _lib.millis("timeout", timeout)
        calls = _WorkCalls(self, name)
        c_work = _lib.WORK(lambda _ud, term, token: calls.call(name, term, token, work))
        lib = _lib.lib()
        try:
            _run_interruptibly(
                lambda cancel_h: lib.simba_run_while_leader(self._h, c_name, c_work, None, ms, cancel_h),
                cancel,
                f"leader-{name}",
            )
        except SimbaError as e:
            calls.raise_failure(e)

    def run_group(
        self,
        name: str,
        partitions: int,
        work: Callable[[int, Term], None],
        timeout: Optional[float] = None,
        cancel: Optional[CancelToken] = None,
    ) -> None:
        """Joins the partition group name of `partitions` partitions (1 to
        4096; partition i is the lease "name.i", held by one node at a time)
        and runs work(partition, term) for each partition this node wins, on
        threads of the library. Partitions spread over the live nodes of the
        group within one of an even share as nodes join and leave. It
        returns when timeout seconds passed or cancel is cancelled, and
        raises a partition's exception when its work fails while its term
        lasts, or ClientClosed. A work that returns gives its partition up
        for one renew interval, so that the group rebalances it; a work must
        return soon after its term ended (term.wait_ended). Every partition
        stops with the ordered handover before this returns."""
        self._check_open()
        c_name = _lib.c_text("name", name, InvalidName)
        if isinstance(partitions, bool) or not isinstance(partitions, int):
            raise TypeError(f"partitions must be an int, not {type(partitions).__name__}")
        if not 1 <= partitions <= 4096:
            raise InvalidArgument(_errors.INVALID_ARGUMENT, f"group {name}: {partitions} partitions, want 1 to 4096")
        if not callable(work):
            raise TypeError("work must be callable")
        ms = _lib.millis("timeout", timeout)
        calls = _WorkCalls(self, name)
        c_work = _lib.PARTITION(
            lambda _ud, p, term, token: calls.call(f"{name}.{p}", term, token, lambda t: work(p, t))
        )
        lib = _lib.lib()
        try:
            _run_interruptibly(
                lambda cancel_h: lib.simba_group_run(self._h, c_name, partitions, c_work, None, ms, cancel_h),
                cancel,
                f"group-{name}",
            )
        except SimbaError as e:
            calls.raise_failure(e)

    def snapshot(self) -> Dict[str, Any]:
        """The session and every lock and election of this client, as the
        document of docs/snapshot.schema.json ("schema": "simba.snapshot/v1"):
        durations in whole milliseconds (remainingMs, ...), lease states
        HOLDING, CONTENDING, COOLDOWN or IDLE."""
        self._check_open()
        p = ctypes.c_void_p()
        _lib.check(_lib.lib().simba_client_snapshot(self._h, ctypes.byref(p)))
        return json.loads(_lib.take_string(p))

    def close(self, timeout: Optional[float] = DEFAULT_WAIT) -> None:
        """Stops every election, ends every term and closes the session, so
        the backend frees every lease at once. Idempotent. timeout bounds
        the whole call: past it, it raises Timeout and the close goes on in
        the background (a backend that cannot be reached frees the leases
        when the session expires, at most one lease later); a timeout of 0
        does not wait. A client still open at the interpreter's exit is
        closed then; one dropped without close(), when it is collected."""
        _lib.check_fork()
        if self.closed:
            return
        ms = _lib.millis("timeout", timeout)
        self.closed = True
        _open_clients.discard(self)
        for el in list(self._elections):
            with el._cond:
                el._h = 0
                el._cond.notify_all()
        self._finalizer.detach()
        _lib.check(_lib.lib().simba_client_close(self._h, ms))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# Clients still open when the interpreter exits are closed before it is torn
# down, so that no election callback arrives into a finalized interpreter
# and the backend frees the leases at once instead of one lease later.
_open_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()
_EXIT_WAIT = 5.0  # seconds the exit waits for all of them together


def _close_at_exit() -> None:
    if _lib.forked:
        return
    deadline = time.monotonic() + _EXIT_WAIT
    for c in list(_open_clients):
        try:
            c.close(timeout=max(deadline - time.monotonic(), 0.0))
        except Exception:  # noqa: BLE001 - the exit goes on; the session expires
            pass


atexit.register(_close_at_exit)
