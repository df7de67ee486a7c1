import queue
import threading
import time

import pytest

import simba


def events():
    q = queue.Queue()
    return q, (lambda t: q.put(("elected", t.token))), (lambda t, r: q.put(("revoked", t.token, r)))


def get(q):
    return q.get(timeout=10)


def test_callbacks_paired_and_step_down(client):
    q, on_elected, on_revoked = events()
    el = client.election("leader", on_elected, on_revoked)
    assert get(q) == ("elected", 1)
    assert el.term is not None and el.term.valid
    el.step_down(cooldown=0.05)
    # step_down returns after on_revoked ran
    assert q.get_nowait() == ("revoked", 1, simba.Reason.STEPPED_DOWN)
    assert get(q) == ("elected", 2)
    el.stop()
    assert q.get_nowait() == ("revoked", 2, simba.Reason.STOPPED)
    assert el.errors == []
    with pytest.raises(simba.NotStarted):
        el.step_down()
    el.stop()


def test_leading(client):
    el = client.election("leader")
    with el.leading(timeout=10) as term:
        assert term.valid and term.token > 0
        assert client.snapshot()["leases"][0]["state"] == "HOLDING"
    assert not term.valid
    assert client.snapshot()["leases"] == []


def test_leading_times_out_while_another_leads(memory_url):
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        first = a.election("leader")
        first.wait_elected(10)
        with pytest.raises(simba.LockTimeout):
            with b.election("leader").leading(timeout=0.3):
                pytest.fail("two leaders")
        # b takes over when a stops
        second = b.election("leader")
        first.stop()
        assert second.wait_elected(10).token > 1
        second.stop()


def test_callbacks_may_call_back(client):
    """A callback steps down and stops its own election: neither waits for it."""
    q = queue.Queue()
    el = None

    def on_elected(term):
        q.put(("elected", term.token, term.remaining > 0))
        if term.token == 1:
            el.step_down()
        else:
            el.stop()

    def on_revoked(term, reason):
        q.put(("revoked", term.token, reason))

    started = threading.Event()
    el = client.election("leader", lambda t: (started.wait(10), on_elected(t)), on_revoked)
    started.set()
    assert get(q) == ("elected", 1, True)
    assert get(q) == ("revoked", 1, simba.Reason.STEPPED_DOWN)
    assert get(q) == ("elected", 2, True)
    assert get(q) == ("revoked", 2, simba.Reason.STOPPED)
    assert el.errors == []


def test_callback_exceptions_are_kept(client):
    def boom(term):
        raise RuntimeError("callback failed")

    el = client.election("leader", boom)
    el.wait_elected(10)
    el.stop()
    assert len(el.errors) == 1 and str(el.errors[0]) == "callback failed"


def test_close_from_callback(memory_url):
    c = simba.Client(memory_url, lease=3)
    done = threading.Event()
    c.election("leader", lambda t: (c.close(), done.set()))
    assert done.wait(10)
    assert c.closed


def test_failover_between_clients(memory_url):
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        qa, ea, ra = events()
        qb, eb, rb = events()
        ela = a.election("leader", ea, ra)
        assert get(qa) == ("elected", 1)
        elb = b.election("leader", eb, rb)
        a.close()  # frees every lease at once
        assert get(qa) == ("revoked", 1, simba.Reason.STOPPED)
        assert get(qb) == ("elected", 2)
        elb.stop()
        ela.stop()


def test_stops_from_two_threads_stop_once(client):
    """Two stops of one election at once: one stops it, the other returns,
    neither raises (the second once raised BadHandle)."""
    el = client.election("leader")
    el.wait_elected(10)
    errors = []

    def stop():
        try:
            el.stop()
        except simba.SimbaError as e:
            errors.append(e)

    threads = [threading.Thread(target=stop) for _ in range(2)]
    with el._cond:  # both stops get as far as the election's lock
        for t in threads:
            t.start()
        time.sleep(0.3)
    for t in threads:
        t.join(10)
    assert errors == []
    assert el.wait_released(10)
