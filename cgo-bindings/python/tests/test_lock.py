import threading

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
