"""A KeyboardInterrupt raised at the exact points where a Ctrl-C can land
between two steps of the package: Python raises it at any bytecode of the
main thread, including the first one of a function and the one right after
a C call returned. Each test injects it at one such point by patching the
function that runs there, and checks that nothing won stays held and no
handle stays open (the no_leaked_handles fixture)."""

import gc
import os
import subprocess
import sys
import threading
import time

import pytest

import simba
from simba import _lib

HERE = os.path.dirname(os.path.abspath(__file__))


class Interrupt:
    """Replaces obj.attr by a function that raises KeyboardInterrupt the
    first time it is called (when armed), and calls the original after."""

    def __init__(self, monkeypatch, obj, attr):
        self.fired = 0
        self.armed = True
        original = getattr(obj, attr)

        def patched(*args, **kwargs):
            if self.armed:
                self.armed = False
                self.fired += 1
                raise KeyboardInterrupt
            return original(*args, **kwargs)

        monkeypatch.setattr(obj, attr, patched)


def leaders(client):
    return [(l["name"], l["kind"]) for l in client.snapshot()["leases"] if l["state"] == "HOLDING"]


def free_for_others(url, name):
    with simba.Client(url, lease=3) as other:
        other.try_acquire(name).close()


def test_interrupt_at_the_start_of_term_close_releases(memory_url, unique, monkeypatch):
    with simba.Client(memory_url, lease=3) as c:
        t = c.acquire(unique, timeout=5)
        hit = Interrupt(monkeypatch, c, "_forget")
        with pytest.raises(KeyboardInterrupt):
            t.close()
        assert hit.fired == 1
        assert leaders(c) == []
        assert simba.stats()["terms"] == 0
        free_for_others(memory_url, unique)
        t.close()  # idempotent afterwards


PACKAGE = os.path.dirname(os.path.abspath(simba.__file__))


def test_interrupt_at_the_first_call_after_the_lock_block_releases(memory_url, unique):
    """A Ctrl-C at the first Python function of the package that runs after
    the body of `with client.lock()` (the generator resuming is not one)."""
    fired = []

    def tracer(frame, event, arg):
        if (
            event == "call"
            and not fired
            and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == PACKAGE
            and frame.f_code.co_name != "lock"
        ):
            fired.append(frame.f_code.co_name)
            raise KeyboardInterrupt
        return None

    with simba.Client(memory_url, lease=3) as c:
        with pytest.raises(KeyboardInterrupt):
            with c.lock(unique, timeout=5):
                sys.settrace(tracer)
        sys.settrace(None)
        assert len(fired) == 1
        assert leaders(c) == [], f"interrupted in {fired[0]}"
        assert simba.stats()["terms"] == 0
        free_for_others(memory_url, unique)


def test_a_lost_term_is_released_when_collected(memory_url, unique):
    with simba.Client(memory_url, lease=3) as c:
        c.acquire(unique, timeout=5)  # dropped at once
        gc.collect()
        assert leaders(c) == []
        assert simba.stats()["terms"] == 0
        free_for_others(memory_url, unique)


def test_release_frees_the_handle(memory_url, unique):
    with simba.Client(memory_url, lease=3) as c:
        kept = []
        for _ in range(3):
            t = c.acquire(unique, timeout=5)
            t.release()
            kept.append(t)
            assert simba.stats()["terms"] == 0
        assert not kept[0].valid
        assert kept[0].reason == simba.Reason.STOPPED
        kept[0].close()


def won_after_the_first_slice(memory_url, unique):
    """A waiter client and a holder that gives the name back after the
    main thread's first 50 ms slice, so that the wait that wins is the
    waiting thread's."""
    holder = simba.Client(memory_url, lease=3)
    held = holder.acquire(unique, timeout=5)
    threading.Timer(0.15, held.close).start()
    return holder


@pytest.mark.parametrize("where", ["_unlink", "_term_of"])
def test_interrupt_after_a_win_of_the_waiting_thread_gives_it_back(memory_url, unique, monkeypatch, where):
    holder = won_after_the_first_slice(memory_url, unique)
    try:
        with simba.Client(memory_url, lease=3) as c, simba.CancelToken() as tok:
            obj = simba.CancelToken if where == "_unlink" else c
            hit = Interrupt(monkeypatch, obj, where)
            with pytest.raises(KeyboardInterrupt):
                c.acquire(unique, timeout=5, cancel=tok)
            assert hit.fired == 1
            time.sleep(0.1)
            assert leaders(c) == []
            assert simba.stats()["terms"] == 0
            free_for_others(memory_url, unique)
    finally:
        holder.close()


def test_interrupt_right_after_the_start_of_an_election_stops_it(memory_url, unique, monkeypatch):
    with simba.Client(memory_url, lease=3) as c:
        hit = Interrupt(monkeypatch, _lib, "check")
        with pytest.raises(KeyboardInterrupt):
            c.election(unique)
        assert hit.fired == 1
        deadline = time.monotonic() + 5
        while simba.stats()["elections"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert simba.stats()["elections"] == 0
        time.sleep(0.2)
        assert leaders(c) == []
        assert simba._live == {}


def slow_revoke(term, reason):
    time.sleep(1.5)


@pytest.mark.parametrize("where", ["wait", "body"])
def test_interrupt_in_leading_does_not_wait_for_the_stop(memory_url, unique, monkeypatch, where):
    with simba.Client(memory_url, lease=3) as c:
        el = c.election(unique, on_revoked=slow_revoke)
        if where == "wait":
            real = simba.Election.wait_elected

            def elected_then_interrupted(self, timeout=None):
                real(self, timeout)
                raise KeyboardInterrupt  # Ctrl-C at the instant of the win

            monkeypatch.setattr(simba.Election, "wait_elected", elected_then_interrupted)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            with el.leading(5):
                if where == "body":
                    start = time.monotonic()
                    raise KeyboardInterrupt
        took = time.monotonic() - start
        assert took < 0.3, f"KeyboardInterrupt left leading() after {took:.3f}s"
        assert el.wait_released(5)
        assert leaders(c) == []


def test_interrupt_in_an_election_block_does_not_wait_for_the_stop(memory_url, unique):
    with simba.Client(memory_url, lease=3) as c:
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            with c.election(unique, on_revoked=slow_revoke) as el:
                el.wait_elected(5)
                start = time.monotonic()
                raise KeyboardInterrupt
        took = time.monotonic() - start
        assert took < 0.3, f"KeyboardInterrupt left the election's block after {took:.3f}s"
        assert el.wait_released(5)


def test_try_acquire_on_the_main_thread_starts_no_thread(client, unique, monkeypatch):
    def no_thread(*args, **kwargs):
        raise AssertionError("try_acquire started a thread")

    monkeypatch.setattr(simba.threading, "Thread", no_thread)
    with client.try_acquire(unique, timeout=5):
        with pytest.raises(simba.LockHeld):
            client.try_acquire(unique)


def test_ensure_valid_of_none_says_what_is_wrong(client, unique):
    with client.lock(unique, timeout=5) as t:
        with pytest.raises(TypeError) as e:
            t.ensure_valid(None)
        assert "min_remaining" in str(e.value) and "None" in str(e.value), str(e.value)
        assert "negative" not in str(e.value)


AT_EXIT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import simba
c = simba.Client(sys.argv[2], lease=3)
def revoked(term, reason):
    print("revoked", reason.name, flush=True)
el = c.election(sys.argv[3], on_revoked=revoked)
el.wait_elected(10)
t = c.acquire(sys.argv[3] + "-lock", timeout=10)
print("leading", flush=True)
# Exits with the client open: its close must run before the interpreter is torn down.
"""


def test_open_clients_are_closed_at_interpreter_exit(memory_url, unique):
    out = subprocess.run(
        [sys.executable, "-c", AT_EXIT, os.path.join(HERE, ".."), memory_url, unique],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["leading", "revoked", "STOPPED"], (out.stdout, out.stderr)
