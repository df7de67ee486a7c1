"""The lease holder, event streams, run_while_leader and partition groups,
through the C API."""

import datetime
import threading
import time

import pytest

import simba


def test_reasons_print_as_names():
    for r in simba.Reason:
        assert str(r) == r.name == simba.reason_name(r)
        assert f"{r}" == r.name and f"{r:>16}".strip() == r.name
    assert simba.Reason.STOPPED == 1
    assert simba.reason_name(99) == "REASON_UNKNOWN"
    assert str(simba.EventKind.REVOKED) == "REVOKED"


def test_holder(memory_url, unique):
    with simba.Client(memory_url, lease=3, identity="node-a") as a, simba.Client(memory_url, lease=3) as b:
        assert b.holder(unique) is None
        with a.lock(unique, timeout=10) as term:
            for c in (a, b):
                h = c.holder(unique)
                assert h is not None and h.identity == "node-a" and h.token == term.token and h.session
                assert h.since is None or h.since.tzinfo is datetime.timezone.utc
        assert b.holder(unique, timeout=5) is None
        with pytest.raises(simba.InvalidName):
            b.holder("a/b")
        with simba.CancelToken() as cancel:
            cancel.cancel()
            with pytest.raises(simba.Cancelled):
                b.holder(unique, cancel=cancel)
    with pytest.raises(simba.ClientClosed):
        a.holder(unique)


def next_of(events, kind, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        e = events.get(timeout=0.2)
        if e is not None and e.kind == kind:
            return e
    pytest.fail(f"no {kind} event within {timeout}s")


def test_events(memory_url, unique):
    c = simba.Client(memory_url, lease=3)
    events = c.events()
    events.get(timeout=0)  # no wait: an event of the session's opening, or None
    with c.lock(unique, timeout=10) as term:
        pass
    e = next_of(events, simba.EventKind.ELECTED)
    assert (e.name, e.token, e.lock) == (unique, term.token, True)
    assert e.time is not None and e.session
    e = next_of(events, simba.EventKind.REVOKED)
    assert e.reason == simba.Reason.STOPPED and "reason=STOPPED" in str(e)
    c.close()
    kinds = [e.kind for e in events]  # the last events, then the end
    assert simba.EventKind.SESSION_CLOSED in kinds
    assert events.dropped == 0
    with pytest.raises(simba.ClientClosed):
        events.get()
    events.close()


def test_events_drop_the_oldest(client, unique):
    """A stream nobody reads never slows the engine; its reader comes back to
    the newest events, told how many it missed."""
    with client.events(capacity=4) as events:
        start = time.monotonic()
        for _ in range(100):
            client.acquire(unique, timeout=10).close()
        assert time.monotonic() - start < 10
        last, reported = None, 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            e = events.get(timeout=0.3)
            if e is None:
                if last is not None and last.kind == simba.EventKind.REVOKED and last.token == 100:
                    break
                continue
            if e.kind == simba.EventKind.DROPPED:
                assert e.dropped > 0
                reported += e.dropped
            elif e.kind != simba.EventKind.KEEP_ALIVE:
                last = e
        assert last is not None and last.kind == simba.EventKind.REVOKED and last.token == 100
        assert reported == events.dropped >= 100


def test_events_close_ends_a_waiting_reader(client):
    events = client.events()
    got = []
    reader = threading.Thread(target=lambda: got.extend(events))
    reader.start()
    time.sleep(0.1)
    events.close()
    reader.join(5)
    assert not reader.is_alive()


def test_run_while_leader(memory_url, unique):
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        seen = []
        a.run_while_leader(unique, lambda term: seen.append((term.valid, term.token)))
        assert seen == [(True, 1)]
        assert a.snapshot()["leases"] == []

        def fails(term):
            raise RuntimeError("work failed")

        with pytest.raises(RuntimeError, match="work failed"):
            a.run_while_leader(unique, fails)

        def works_until_the_end(term):
            seen.append(term.token)
            assert term.wait_ended()  # until the run's timeout stops the election
            assert not term.valid and term.reason == simba.Reason.STOPPED

        start = time.monotonic()
        a.run_while_leader(unique, works_until_the_end, timeout=0.3)
        assert 0.3 <= time.monotonic() - start < 5
        with b.try_acquire(unique) as term:  # released at once
            assert term.token > seen[-1]

        with simba.CancelToken() as cancel:
            threading.Timer(0.2, cancel.cancel).start()
            b.run_while_leader(unique + "-2", works_until_the_end, cancel=cancel)


def test_run_while_leader_is_closed_from_its_work(memory_url, unique):
    c = simba.Client(memory_url, lease=3)

    def closes(term):
        c.close()
        term.wait_ended(5)

    with pytest.raises(simba.ClientClosed):
        c.run_while_leader(unique, closes)


def test_run_while_leader_refuses_a_started_election(client, unique):
    el = client.election(unique)
    with pytest.raises(simba.AlreadyStarted):
        client.run_while_leader(unique, lambda t: None, timeout=1)
    el.stop()
    with pytest.raises(TypeError):
        client.run_while_leader(unique, None)


def test_run_group(memory_url, unique):
    """Two nodes share four partitions, two each, never one partition on both."""
    mu = threading.Lock()
    holders = {}
    overlap = []

    def work(node):
        def run(p, term):
            with mu:
                if p in holders:
                    overlap.append(p)
                holders[p] = node
            term.wait_ended()
            with mu:
                holders.pop(p, None)

        return run

    def counts():
        with mu:
            return sorted(list(holders.values()).count(n) for n in ("a", "b"))

    with simba.Client(memory_url, lease=0.9) as a, simba.Client(memory_url, lease=0.9) as b:
        with simba.CancelToken() as cancel:
            runs = [
                threading.Thread(target=c.run_group, args=(unique, 4, work(n)), kwargs={"cancel": cancel})
                for c, n in ((a, "a"), (b, "b"))
            ]
            runs[0].start()
            deadline = time.monotonic() + 10
            while counts() != [0, 4] and time.monotonic() < deadline:
                time.sleep(0.02)
            assert counts() == [0, 4]
            runs[1].start()
            while counts() != [2, 2] and time.monotonic() < deadline:
                time.sleep(0.02)
            assert counts() == [2, 2]
            cancel.cancel()
            for r in runs:
                r.join(10)
                assert not r.is_alive()
    assert overlap == [] and holders == {}


def test_run_group_failure_and_bad_input(client, unique):
    def fails(p, term):
        if p == 1:
            raise simba.TermExpired(11, "partition 1 failed")

    with pytest.raises(simba.TermExpired, match="partition 1 failed"):
        client.run_group(unique, 2, fails, timeout=10)
    for bad in (0, 4097):
        with pytest.raises(simba.InvalidArgument):
            client.run_group(unique, bad, fails)
    with pytest.raises(simba.InvalidName):
        client.run_group("g" * 127, 10, fails)
