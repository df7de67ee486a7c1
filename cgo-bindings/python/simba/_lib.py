"""Loading libsimba.so and the ctypes prototypes of simba.h."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import threading
from typing import Optional

from . import errors

NO_TIMEOUT = -1
MAX_MILLIS = 2**63 - 1  # INT64_MAX: a longer wait waits this (the library caps it at about 292 years)

handle = ctypes.c_uint64
status = ctypes.c_int32


class Options(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("lease_ms", ctypes.c_int64),
        ("renew_ms", ctypes.c_int64),
        ("identity", ctypes.c_char_p),
        ("open_timeout_ms", ctypes.c_int64),
    ]


class Stats(ctypes.Structure):
    _fields_ = [
        ("clients", ctypes.c_int64),
        ("terms", ctypes.c_int64),
        ("elections", ctypes.c_int64),
        ("cancels", ctypes.c_int64),
        ("goroutines", ctypes.c_int64),
    ]


ELECTED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, handle, handle, ctypes.c_uint64)
REVOKED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, handle, handle, ctypes.c_uint64, ctypes.c_int32)
RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Listener(ctypes.Structure):
    _fields_ = [("on_elected", ELECTED), ("on_revoked", REVOKED), ("user_data", ctypes.c_void_p)]


# Holders, events and leader work (simba_lease_holder, simba_events_*,
# simba_run_while_leader, simba_group_run). The strings of Holder and
# Event are the library's: c_void_p, read and then freed by the clear call.
class Holder(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("token", ctypes.c_uint64),
        ("since_unix_ns", ctypes.c_int64),
        ("session", ctypes.c_void_p),
        ("identity", ctypes.c_void_p),
    ]


class Event(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("kind", ctypes.c_int32),
        ("time_unix_ns", ctypes.c_int64),
        ("token", ctypes.c_uint64),
        ("reason", ctypes.c_int32),
        ("lock", ctypes.c_int32),
        ("granted_ns", ctypes.c_int64),
        ("latency_ns", ctypes.c_int64),
        ("waited_ns", ctypes.c_int64),
        ("dropped", ctypes.c_int64),
        ("session", ctypes.c_void_p),
        ("name", ctypes.c_void_p),
        ("error", ctypes.c_void_p),
        ("warning_code", ctypes.c_void_p),
        ("warning_message", ctypes.c_void_p),
    ]


WORK = ctypes.CFUNCTYPE(status, ctypes.c_void_p, handle, ctypes.c_uint64)
PARTITION = ctypes.CFUNCTYPE(status, ctypes.c_void_p, ctypes.c_int32, handle, ctypes.c_uint64)


_PROTOTYPES = {
    "simba_version": (ctypes.c_char_p, []),
    "simba_abi_version": (ctypes.c_int32, []),
    "simba_status_name": (ctypes.c_char_p, [status]),
    "simba_last_error": (status, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "simba_last_error_message": (ctypes.c_void_p, []),
    "simba_string_free": (None, [ctypes.c_void_p]),
    "simba_stats_get": (status, [ctypes.POINTER(Stats)]),
    "simba_client_open": (status, [ctypes.c_char_p, ctypes.POINTER(Options), ctypes.POINTER(handle)]),
    "simba_client_close": (status, [handle, ctypes.c_int64]),
    "simba_client_snapshot": (status, [handle, ctypes.POINTER(ctypes.c_void_p)]),
    "simba_lock_acquire": (status, [handle, ctypes.c_char_p, ctypes.c_int64, handle, ctypes.POINTER(handle)]),
    "simba_lock_try_acquire": (status, [handle, ctypes.c_char_p, ctypes.c_int64, handle, ctypes.POINTER(handle)]),
    "simba_semaphore_acquire": (
        status,
        [handle, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64, handle, ctypes.POINTER(handle)],
    ),
    "simba_semaphore_try_acquire": (
        status,
        [handle, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64, handle, ctypes.POINTER(handle)],
    ),
    "simba_lock_release": (status, [handle, ctypes.c_int64]),
    "simba_term_free": (status, [handle]),
    "simba_term_token": (status, [handle, ctypes.POINTER(ctypes.c_uint64)]),
    "simba_term_valid": (status, [handle, ctypes.POINTER(ctypes.c_int)]),
    "simba_term_remaining_ms": (status, [handle, ctypes.POINTER(ctypes.c_int64)]),
    "simba_term_ensure_valid": (status, [handle, ctypes.c_int64]),
    "simba_term_reason": (status, [handle, ctypes.POINTER(ctypes.c_int32)]),
    "simba_election_start": (status, [handle, ctypes.c_char_p, ctypes.POINTER(Listener), ctypes.POINTER(handle)]),
    "simba_election_start_ex": (
        status,
        [handle, ctypes.c_char_p, ctypes.POINTER(Listener), RELEASE, ctypes.POINTER(handle)],
    ),
    "simba_election_step_down": (status, [handle, ctypes.c_int64, ctypes.c_int64]),
    "simba_election_stop": (status, [handle, ctypes.c_int64]),
    "simba_cancel_new": (status, [ctypes.POINTER(handle)]),
    "simba_cancel": (status, [handle]),
    "simba_cancel_free": (status, [handle]),
    # holders, events, leader work and groups
    "simba_stats_events": (status, [ctypes.POINTER(ctypes.c_int64)]),
    "simba_reason_name": (ctypes.c_char_p, [ctypes.c_int32]),
    "simba_term_wait_end": (status, [handle, ctypes.c_int64]),
    "simba_lease_holder": (
        status,
        [handle, ctypes.c_char_p, ctypes.c_int64, handle, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(Holder)],
    ),
    "simba_holder_clear": (None, [ctypes.POINTER(Holder)]),
    "simba_run_while_leader": (status, [handle, ctypes.c_char_p, WORK, ctypes.c_void_p, ctypes.c_int64, handle]),
    "simba_group_run": (
        status,
        [handle, ctypes.c_char_p, ctypes.c_int32, PARTITION, ctypes.c_void_p, ctypes.c_int64, handle],
    ),
    "simba_events_subscribe": (status, [handle, ctypes.c_int32, ctypes.POINTER(handle)]),
    "simba_events_next": (status, [handle, ctypes.c_int64, ctypes.POINTER(Event)]),
    "simba_events_dropped": (status, [handle, ctypes.POINTER(ctypes.c_uint64)]),
    "simba_events_free": (status, [handle]),
    "simba_event_clear": (None, [ctypes.POINTER(Event)]),
}

ABI_VERSION = 1

_lib: Optional[ctypes.CDLL] = None
_lock = threading.Lock()

# The library's threads do not survive os.fork(): in a child forked after
# the library was loaded, every call fails with Forked (the library itself
# refuses them too, SIMBA_ERR_FORKED), including the ones answered here
# without the library.
forked = False

FORKED_MESSAGE = (
    "simba: this process was forked from one that had loaded libsimba, and the library cannot run in it: "
    "no Client, Term or Election of the parent is usable here. Start the child with the multiprocessing "
    'start method "spawn" (or "forkserver"), or with subprocess, and open a new Client in it.'
)


def _after_fork_in_child() -> None:
    global forked
    if _lib is not None:
        forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check_fork() -> None:
    """Raises Forked in a forked child of a process that loaded the library."""
    if forked:
        raise errors.Forked(errors.FORKED, FORKED_MESSAGE)


def library_path() -> str:
    """The path of libsimba.so: $SIMBA_LIBRARY when set (an override), else the
    copy in this package's directory (the wheel of `make wheel` carries one),
    else what the system linker finds as "simba"."""
    env = os.environ.get("SIMBA_LIBRARY")
    if env:
        return env
    package = os.path.dirname(os.path.abspath(__file__))
    here = os.path.join(package, "libsimba.so")
    if os.path.isfile(here):
        return here
    found = ctypes.util.find_library("simba")
    if found:
        return found
    raise OSError(
        f"libsimba.so is neither in {package} nor found by the system linker: install the wheel that "
        "`make wheel` builds (it carries the library), or set SIMBA_LIBRARY to the library's path"
    )


def lib() -> ctypes.CDLL:
    """The loaded library, with every prototype set; loaded on first use."""
    global _lib
    with _lock:
        if _lib is None:
            loaded = ctypes.CDLL(library_path())
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(loaded, name)
                fn.restype = restype
                fn.argtypes = argtypes
            if loaded.simba_abi_version() != ABI_VERSION:
                raise OSError(
                    f"libsimba ABI {loaded.simba_abi_version()} at {library_path()}, this package needs {ABI_VERSION}"
                )
            _lib = loaded
        return _lib


def last_error() -> str:
    """The message of the last failed call of this thread."""
    p = lib().simba_last_error_message()
    if not p:
        return ""
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        lib().simba_string_free(p)


def check(st: int) -> None:
    """Raises the exception of a status other than SIMBA_OK."""
    if st != 0:
        raise errors.from_status(st, last_error())


def error_of(st: int, message: str) -> Optional[errors.SimbaError]:
    """The exception of a status and a message read on another thread."""
    return None if st == 0 else errors.from_status(st, message)


def take_string(p: ctypes.c_void_p) -> str:
    """Decodes and frees a string the library returned."""
    try:
        return ctypes.string_at(p.value).decode("utf-8")
    finally:
        lib().simba_string_free(p)


# The status of each exception class c_text raises.
_STATUS_OF = {errors.InvalidURL: errors.INVALID_URL, errors.InvalidName: errors.INVALID_NAME}


def c_text(what: str, value: str, exc: type) -> bytes:
    """Encodes a string for C. NUL characters cannot cross (C would cut the
    string there), so they raise exc; lone surrogates (bytes that are not
    UTF-8, as os.fsdecode gives them) cross as those bytes, for the library
    to refuse."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\x00" in value:
        # Not quoted: a URL's password would be in the message.
        at = value.index("\x00")
        raise exc(_STATUS_OF.get(exc, errors.INVALID_ARGUMENT), f"{what} contains a NUL character at offset {at}")
    return value.encode("utf-8", "surrogateescape")


def millis(what: str, seconds: Optional[float], none: int = NO_TIMEOUT, wait: bool = True) -> int:
    """Converts seconds to milliseconds for C; None gives `none`.

    A wait (wait=True: a timeout, a cooldown) is rounded up, so that a
    timeout of 0.0005 s waits 1 ms rather than making it 0 (one attempt),
    and one too large (up to inf) waits the maximum. A setting (wait=False:
    a lease, a renew interval) is rounded to the nearest millisecond and
    refused when it is too large."""
    if seconds is None:
        return none
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(seconds).__name__}")
    if seconds != seconds or seconds == float("-inf") or (seconds == float("inf") and not wait):
        raise errors.InvalidArgument(errors.INVALID_ARGUMENT, f"{what} {seconds} is not a finite number of seconds")
    if seconds < 0:
        raise errors.InvalidArgument(errors.INVALID_ARGUMENT, f"{what} {seconds}s is negative")
    if wait:
        if seconds * 1000 >= MAX_MILLIS:
            return MAX_MILLIS
        # Round up, but not a float's noise: 0.3 s is 300 ms, not 301.
        return min(math.ceil(round(seconds * 1000, 6)), MAX_MILLIS)
    ms = int(round(seconds * 1000))
    if ms >= 2**63 // 1_000_000:
        raise errors.InvalidArgument(errors.INVALID_ARGUMENT, f"{what} {seconds}s is too large")
    return ms
