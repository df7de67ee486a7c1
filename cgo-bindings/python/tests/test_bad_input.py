"""Every bad input is refused with a clear exception, never a crash."""

import ctypes
import math

import pytest

import simba
from simba import _lib


@pytest.mark.parametrize(
    "url, exc",
    [
        ("localhost:6379", simba.InvalidURL),
        ("etcd://x", simba.InvalidURL),
        ("memory://a:1", simba.InvalidURL),
        ("memory://\udcff", simba.InvalidArgument),  # bytes that are not UTF-8
        ("memory://a\x00b", simba.InvalidURL),
        ("", simba.InvalidURL),
    ],
)
def test_bad_urls(url, exc):
    with pytest.raises(exc):
        simba.Client(url)


def test_url_password_never_in_errors():
    with pytest.raises(simba.SimbaError) as e:
        simba.Client("redis://user:hunter2@127.0.0.1:1/0", open_timeout=1)
    assert "hunter2" not in str(e.value)


def test_nul_errors_quote_no_password_and_keep_their_status(client):
    with pytest.raises(simba.InvalidURL) as e:
        simba.Client("redis://:s3cr3tPW@127.0.0.1:16379/0\x00")
    assert "s3cr3tPW" not in str(e.value) and "offset 35" in str(e.value)
    assert e.value.status == 3  # SIMBA_ERR_INVALID_URL
    with pytest.raises(simba.InvalidName) as e:
        client.acquire("a\x00b", timeout=1)
    assert e.value.status == 2  # SIMBA_ERR_INVALID_NAME
    with pytest.raises(simba.InvalidArgument) as e:
        simba.Client("memory://x", identity="a\x00")
    assert e.value.status == 1  # SIMBA_ERR_INVALID_ARGUMENT


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"lease": -1}, simba.InvalidArgument),
        ({"lease": math.nan}, simba.InvalidArgument),
        ({"lease": math.inf}, simba.InvalidArgument),
        ({"lease": 1e300}, simba.InvalidArgument),
        ({"lease": 1, "renew": 0.9}, simba.InvalidConfig),
        ({"identity": "bad\udcff"}, simba.InvalidArgument),
        ({"identity": "a\x00"}, simba.InvalidArgument),
        ({"lease": "1s"}, TypeError),
    ],
)
def test_bad_settings(memory_url, kwargs, exc):
    with pytest.raises(exc):
        simba.Client(memory_url, **kwargs)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a b", "é", "x" * 129, "a\x00b", "bad\udcff"])
def test_bad_names(client, name):
    with pytest.raises(simba.InvalidName):
        client.acquire(name, timeout=1)
    with pytest.raises(simba.InvalidName):
        client.try_acquire(name)
    with pytest.raises(simba.InvalidName):
        client.election(name)


def test_name_not_a_str(client):
    with pytest.raises(TypeError):
        client.acquire(b"job")


def test_bad_timeouts(client):
    with pytest.raises(simba.InvalidArgument):
        client.acquire("job", timeout=-0.5)
    with client.lock("job", timeout=5) as term:
        with pytest.raises(simba.InvalidArgument):
            term.ensure_valid(-1)
        with pytest.raises(simba.InvalidArgument):
            term.release(timeout=math.nan)


def test_name_in_use(client):
    el = client.election("leader")
    with pytest.raises(simba.NameInUse):
        client.try_acquire("leader")
    with pytest.raises(simba.AlreadyStarted):
        client.election("leader")
    el.stop()


# The C API itself, without the package's checks: NULL pointers, wrong and
# freed handles, a closed client, the last-error buffer.


def status(st):
    return _lib.lib().simba_status_name(st).decode()


def test_c_null_pointers(client):
    lib = _lib.lib()
    h = _lib.handle()
    assert status(lib.simba_client_open(None, None, ctypes.byref(h))) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert "url is NULL" in _lib.last_error()
    assert status(lib.simba_client_open(b"memory://", None, None)) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert status(lib.simba_lock_acquire(client._h, None, 0, 0, ctypes.byref(h))) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert status(lib.simba_lock_acquire(client._h, b"job", 0, 0, None)) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert status(lib.simba_client_snapshot(client._h, None)) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert status(lib.simba_election_start(client._h, b"x", None, ctypes.byref(h))) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert status(lib.simba_term_token(client._h, None)) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert status(lib.simba_stats_get(None)) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert status(lib.simba_cancel_new(None)) == "SIMBA_ERR_INVALID_ARGUMENT"


def test_c_bad_options_size():
    opts = _lib.Options()
    opts.size = 0
    h = _lib.handle()
    st = _lib.lib().simba_client_open(b"memory://", ctypes.byref(opts), ctypes.byref(h))
    assert status(st) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert "sizeof(simba_options)" in _lib.last_error()


def test_c_wrong_and_freed_handles(client):
    lib = _lib.lib()
    token = ctypes.c_uint64()
    assert status(lib.simba_term_token(0, ctypes.byref(token))) == "SIMBA_ERR_BAD_HANDLE"
    assert status(lib.simba_term_token(client._h, ctypes.byref(token))) == "SIMBA_ERR_BAD_HANDLE"
    assert status(lib.simba_term_token(2**64 - 1, ctypes.byref(token))) == "SIMBA_ERR_BAD_HANDLE"
    term = client.acquire("job", timeout=5)
    assert status(lib.simba_client_close(term._h, 0)) == "SIMBA_ERR_BAD_HANDLE"
    assert status(lib.simba_election_stop(term._h, 0)) == "SIMBA_ERR_BAD_HANDLE"
    term.close()
    assert status(lib.simba_term_token(term._h, ctypes.byref(token))) == "SIMBA_ERR_BAD_HANDLE"
    assert status(lib.simba_term_free(term._h)) == "SIMBA_ERR_BAD_HANDLE"


def test_c_closed_client_frees_its_handles(memory_url):
    lib = _lib.lib()
    c = simba.Client(memory_url, lease=3)
    term = c.acquire("job", timeout=5)
    h = c._h
    c.close()
    assert status(lib.simba_client_close(h, 0)) == "SIMBA_ERR_BAD_HANDLE"
    valid = ctypes.c_int()
    assert status(lib.simba_term_valid(term._h, ctypes.byref(valid))) == "SIMBA_ERR_BAD_HANDLE"


def test_c_last_error_buffer():
    lib = _lib.lib()
    lib.simba_client_open(b"nope", None, ctypes.byref(_lib.handle()))
    n = ctypes.c_size_t()
    assert lib.simba_last_error(None, 0, ctypes.byref(n)) == 0
    assert n.value > 10
    small = ctypes.create_string_buffer(8)
    assert status(lib.simba_last_error(small, 8, None)) == "SIMBA_ERR_BUFFER_TOO_SMALL"
    assert small.value == _lib.last_error().encode()[:7]
    big = ctypes.create_string_buffer(n.value + 1)
    assert lib.simba_last_error(big, n.value + 1, None) == 0
    assert big.value.decode() == _lib.last_error()
    assert status(lib.simba_last_error(None, 5, None)) == "SIMBA_ERR_INVALID_ARGUMENT"
    assert lib.simba_status_name(1234) == b"SIMBA_STATUS_UNKNOWN"


def test_c_engine_calls_refuse_bad_input(client):
    """The holder, event, leader work and group calls of the raw C API."""
    lib = _lib.lib()
    held = ctypes.c_int()
    out = _lib.Holder()
    out.size = ctypes.sizeof(out)
    h = _lib.handle()
    ev = _lib.Event()
    ev.size = ctypes.sizeof(ev)
    n = ctypes.c_uint64()
    work = _lib.WORK(lambda *_: 0)
    part = _lib.PARTITION(lambda *_: 0)
    calls = [
        (lambda: lib.simba_lease_holder(client._h, None, 0, 0, ctypes.byref(held), ctypes.byref(out)), "INVALID_ARGUMENT"),
        (lambda: lib.simba_lease_holder(client._h, b"x", 0, 0, None, ctypes.byref(out)), "INVALID_ARGUMENT"),
        (lambda: lib.simba_lease_holder(client._h, b"x", 0, 0, ctypes.byref(held), None), "INVALID_ARGUMENT"),
        (lambda: lib.simba_lease_holder(0, b"x", 0, 0, ctypes.byref(held), ctypes.byref(out)), "BAD_HANDLE"),
        (lambda: lib.simba_lease_holder(client._h, b"a/b", 0, 0, ctypes.byref(held), ctypes.byref(out)), "INVALID_NAME"),
        (lambda: lib.simba_lease_holder(client._h, b"x", -7, 0, ctypes.byref(held), ctypes.byref(out)), "INVALID_ARGUMENT"),
        (lambda: lib.simba_events_subscribe(client._h, 0, None), "INVALID_ARGUMENT"),
        (lambda: lib.simba_events_subscribe(client._h, -1, ctypes.byref(h)), "INVALID_ARGUMENT"),
        (lambda: lib.simba_events_subscribe(2**64 - 1, 0, ctypes.byref(h)), "BAD_HANDLE"),
        (lambda: lib.simba_events_next(client._h, 0, ctypes.byref(ev)), "BAD_HANDLE"),
        (lambda: lib.simba_events_next(client._h, 0, None), "INVALID_ARGUMENT"),
        (lambda: lib.simba_events_dropped(client._h, ctypes.byref(n)), "BAD_HANDLE"),
        (lambda: lib.simba_events_free(client._h), "BAD_HANDLE"),
        (lambda: lib.simba_term_wait_end(client._h, 0), "BAD_HANDLE"),
        (lambda: lib.simba_run_while_leader(client._h, b"x", _lib.WORK(), None, 0, 0), "INVALID_ARGUMENT"),
        (lambda: lib.simba_run_while_leader(client._h, None, work, None, 0, 0), "INVALID_ARGUMENT"),
        (lambda: lib.simba_run_while_leader(0, b"x", work, None, 0, 0), "BAD_HANDLE"),
        (lambda: lib.simba_group_run(client._h, b"g", 0, part, None, 0, 0), "INVALID_ARGUMENT"),
        (lambda: lib.simba_group_run(client._h, b"g", 2, _lib.PARTITION(), None, 0, 0), "INVALID_ARGUMENT"),
        (lambda: lib.simba_group_run(client._h, b"g\xff", 2, part, None, 0, 0), "INVALID_NAME"),
        (lambda: lib.simba_stats_events(None), "INVALID_ARGUMENT"),
    ]
    for call, want in calls:
        assert status(call()) == "SIMBA_ERR_" + want, _lib.last_error()
    small = _lib.Event()
    small.size = 8
    with client.events() as events:
        assert status(lib.simba_events_next(events._h, 0, ctypes.byref(small))) == "SIMBA_ERR_INVALID_ARGUMENT"
        assert "sizeof(simba_event)" in _lib.last_error()
    lib.simba_event_clear(None)
    lib.simba_holder_clear(None)
    assert lib.simba_reason_name(-1) == b"REASON_UNKNOWN"
