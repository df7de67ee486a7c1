import threading

import pytest

import simba


def test_permits_up_to_n(memory_url):
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        with a.semaphore("pool", 2, timeout=5) as first, b.semaphore("pool", 2, timeout=5) as second:
            assert first.valid and second.valid
            assert second.token > first.token
            with pytest.raises(simba.LockHeld):
                b.try_acquire_permit("pool", 2)
            with pytest.raises(simba.LockTimeout):
                b.acquire_permit("pool", 2, timeout=0.1)
            last = second.token
        assert not first.valid and not second.valid
        with b.semaphore("pool", 2, timeout=5) as again:
            assert again.token > last


def test_permits_mismatch(client):
    with client.semaphore("pool", 2, timeout=5):
        with pytest.raises(simba.PermitsMismatch) as e:
            client.try_acquire_permit("pool", 3)
        assert "3" in str(e.value)
    with client.semaphore("pool", 3, timeout=5) as term:
        assert term.valid


def test_release_wakes_a_waiter(memory_url):
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        held = a.acquire_permit("pool", 1, timeout=5)
        got = []
        t = threading.Thread(target=lambda: got.append(b.acquire_permit("pool", 1, timeout=10)))
        t.start()
        held.release()
        t.join()
        assert got and got[0].token > held.token
        got[0].release()
        got[0].close()
        held.close()


@pytest.mark.parametrize("permits", [0, -1, simba.MAX_PERMITS + 1, 1 << 40, 1.5, "2", None, True])
def test_bad_permits(client, permits):
    with pytest.raises(simba.InvalidArgument):
        client.acquire_permit("pool", permits, timeout=1)
    with pytest.raises(simba.InvalidArgument):
        client.try_acquire_permit("pool", permits)


def test_bad_names(client):
    for name in ["", "a b", "x" * 200]:
        with pytest.raises(simba.InvalidName):
            client.acquire_permit(name, 2, timeout=1)
    long = "n" * 126  # its slot "n...:9" fits, "n...:99" does not
    with pytest.raises(simba.InvalidName):
        client.try_acquire_permit(long, 100)
    client.try_acquire_permit(long, 10).close()


def test_closed_client(memory_url):
    c = simba.Client(memory_url, lease=3)
    c.close()
    with pytest.raises(simba.ClientClosed):
        c.acquire_permit("pool", 2, timeout=1)
