import gc
import threading
import time

import pytest

import simba


def test_lock_and_release(client):
    with client.lock("job", timeout=5) as term:
        assert term.token > 0
        assert term.valid
        assert 0 < term.remaining <= 3
        term.ensure_valid(0.5)
        with pytest.raises(simba.TermExpired):
            term.ensure_valid(3600)
        with pytest.raises(simba.LockHeld):
            client.try_acquire("job")
        first = term.token
    assert not term.valid
    assert term.remaining == 0
    with client.lock("job", timeout=5) as again:
        assert again.token > first


def test_release_is_idempotent_and_from_any_thread(client):
    term = client.acquire("job", timeout=5)
    t = threading.Thread(target=term.release)
    t.start()
    t.join()
    term.release()
    assert not term.valid
    assert term.reason == simba.Reason.STOPPED
    term.close()
    term.close()


def test_second_client_waits_for_the_release(memory_url):
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        held = a.acquire("job", timeout=5)
        with pytest.raises(simba.LockTimeout) as e:
            b.acquire("job", timeout=0.1)
        assert not isinstance(e.value, simba.BackendUnavailable)
        got = []
        waiter = threading.Thread(target=lambda: got.append(b.acquire("job", timeout=10)))
        waiter.start()
        held.close()
        waiter.join()
        assert got and got[0].token > held.token
        got[0].close()


def test_cancel_token(memory_url):
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        with a.lock("job", timeout=5), simba.CancelToken() as cancel:
            errors = []

            def wait():
                try:
                    b.acquire("job", cancel=cancel)
                except simba.SimbaError as e:
                    errors.append(e)

            t = threading.Thread(target=wait)
            t.start()
            cancel.cancel()
            t.join(10)
            assert not t.is_alive()
            assert len(errors) == 1 and isinstance(errors[0], simba.Cancelled)


def test_close_of_a_token_cancels_its_waits(memory_url):
    """close() cancels the token first: a wait given it ends at once with
    Cancelled, not at its timeout."""
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        with a.lock("job", timeout=5):
            cancel = simba.CancelToken()
            closer = threading.Timer(0.3, cancel.close)
            closer.start()
            start = time.monotonic()
            with pytest.raises(simba.Cancelled):
                b.acquire("job", timeout=3, cancel=cancel)  # on the main thread
            assert time.monotonic() - start < 2
            closer.join()


def test_a_closed_token_stays_cancelled(memory_url, unique):
    """A closed token is a cancelled one: every call given it raises
    Cancelled at once, on the main thread and on others, instead of
    waiting as if there were no token."""
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        with a.lock("job", timeout=5):
            cancel = simba.CancelToken()
            cancel.close()

            def calls():
                start = time.monotonic()
                with pytest.raises(simba.Cancelled):
                    b.acquire("job", timeout=3, cancel=cancel)
                with pytest.raises(simba.Cancelled):
                    b.try_acquire("job", cancel=cancel)
                with pytest.raises(simba.Cancelled):
                    b.holder("job", cancel=cancel)
                with pytest.raises(simba.Cancelled):
                    b.run_while_leader(unique, lambda term: None, timeout=3, cancel=cancel)
                with pytest.raises(simba.Cancelled):
                    b.run_group(unique, 2, lambda p, term: None, timeout=3, cancel=cancel)
                assert time.monotonic() - start < 2

            calls()
            errors = []
            t = threading.Thread(target=lambda: errors.extend(_failure(calls)))
            t.start()
            t.join(20)
            assert not t.is_alive() and errors == []


def _failure(fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 - handed to the test's thread
        return [e]
    return []


def test_dropped_token_and_client_are_freed(memory_url):
    """A CancelToken and a Client dropped without close() free their
    handles when collected (the client's close goes on in the background)."""
    cancel = simba.CancelToken()
    c = simba.Client(memory_url, lease=3)
    c.acquire("job", timeout=5).close()
    assert simba.stats()["cancels"] == 1 and simba.stats()["clients"] == 1
    del cancel, c
    gc.collect()
    assert simba.stats()["cancels"] == 0 and simba.stats()["clients"] == 0


def test_snapshot(client):
    with client.lock("job", timeout=5) as term:
        s = client.snapshot()
    assert s["session"]["status"] == "LIVE"
    assert s["session"]["id"]
    [lease] = s["leases"]
    assert lease["name"] == "job" and lease["kind"] == "lock" and lease["state"] == "HOLDING"
    assert lease["token"] == term.token and lease["remainingMs"] > 0


def test_closed_client(memory_url):
    c = simba.Client(memory_url, lease=3)
    term = c.acquire("job", timeout=5)
    c.close()
    c.close()
    assert not term.valid
    term.close()
    with pytest.raises(simba.ClientClosed):
        c.acquire("job", timeout=1)
    with pytest.raises(simba.ClientClosed):
        c.snapshot()
    with pytest.raises(simba.ClientClosed):
        c.election("leader")


def test_goroutines_return_to_baseline(memory_url):
    before = simba.stats()["goroutines"]
    for _ in range(5):
        with simba.Client(memory_url, lease=3) as c:
            with c.lock("job", timeout=5):
                pass
    after = simba.stats()["goroutines"]
    assert after <= before + 2, f"goroutines {before} -> {after}"


def test_redis_lock(redis_url, unique):
    with simba.Client(redis_url, lease=3, identity="pytest") as c:
        with c.lock(unique, timeout=5) as term:
            assert term.valid and term.token > 0
