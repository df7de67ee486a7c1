"""What a process can do to the package around it: fork, drop an election
whose stop timed out, freeze the backend under a close, pass extreme
timeouts. A crash or a hang runs in a child process, so that it fails the
test instead of the runner."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

import simba
from simba import _lib

HERE = os.path.dirname(os.path.abspath(__file__))


def run_script(script, *args, timeout=60):
    return subprocess.run(
        [sys.executable, "-c", script, os.path.join(HERE, ".."), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ------------------------------------------------------------ fork


FORK = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import simba
c = simba.Client(sys.argv[2], lease=3)
term = c.acquire("job", timeout=10)
el = c.election("leader")
el.wait_elected(10)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    import signal
    signal.alarm(10)  # a call that hangs fails the check
    out = []
    def attempt(what, fn):
        try:
            v = fn()
            out.append(f"{what}: returned {v!r}")
        except simba.Forked as e:
            out.append(f"{what}: Forked: {e}")
        except Exception as e:
            out.append(f"{what}: {type(e).__name__}: {e}")
    attempt("valid", lambda: term.valid)
    attempt("remaining", lambda: term.remaining)
    attempt("ensure_valid", lambda: term.ensure_valid())
    attempt("election term", lambda: el.term)
    attempt("wait_elected", lambda: el.wait_elected(1))
    attempt("acquire", lambda: c.acquire("other", timeout=1))
    attempt("snapshot", lambda: c.snapshot())
    attempt("new client", lambda: simba.Client("memory://child"))
    attempt("stats", lambda: simba.stats())
    attempt("release", lambda: term.release())
    attempt("close", lambda: c.close())
    os.write(w, "\n".join(out).encode())
    os._exit(0)
os.close(w)
data = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
_, status = os.waitpid(pid, 0)
print(data.decode())
print(f"child status {status}")
print(f"parent valid {term.valid} token {term.token}")
el.stop()
term.close()
c.close()
"""


def test_forked_child_sees_no_valid_term(memory_url):
    res = run_script(FORK, memory_url)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.strip().splitlines()
    assert "child status 0" in lines, res.stdout
    assert "parent valid True token 1" in lines, res.stdout
    child = [line for line in lines if ": " in line and not line.startswith(("child status", "parent"))]
    assert len(child) == 11, res.stdout
    for line in child:
        assert ": Forked: " in line, f"in the forked child, {line}"
        assert "spawn" in line, f"the error does not say what to do: {line}"


def _spawned_worker(url, results):
    with simba.Client(url, lease=3) as c:
        with c.lock("job", timeout=10) as term:
            results.put(term.token)


def test_spawned_child_opens_its_own_client(memory_url):
    """The way the Forked error points to: a child started with the spawn
    start method opens a client of its own and works."""
    import multiprocessing

    simba.stats()  # the library is loaded in the parent
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    p = ctx.Process(target=_spawned_worker, args=(memory_url, results))
    p.start()
    try:
        assert results.get(timeout=30) == 1
        p.join(30)
        assert p.exitcode == 0
    finally:
        if p.is_alive():
            p.kill()
            p.join()


# ------------------------------------------------------------ a stop that timed out


STOP_TIMEOUT = r"""
import gc, sys, threading, time
sys.path.insert(0, sys.argv[1])
import simba
c = simba.Client(sys.argv[2], lease=3)
for i in range(int(sys.argv[3])):
    entered = threading.Event()
    def on_elected(term):
        entered.set()
        time.sleep(0.3)
    def on_revoked(term, reason):
        time.sleep(0.05)
    el = c.election(f"leader-{i}", on_elected, on_revoked)
    assert entered.wait(10)
    try:
        el.stop(timeout=0.02)
    except simba.Timeout:
        pass
    del el, on_elected, on_revoked
    # Collect all the time while the callbacks end and the stop completes:
    # what the package gave C must outlive the last callback.
    end = time.monotonic() + 0.6
    while time.monotonic() < end:
        gc.collect()
print("alive", flush=True)
c.close()
"""


def test_dropped_election_after_a_timed_out_stop_does_not_crash(memory_url):
    res = run_script(STOP_TIMEOUT, memory_url, "5")
    assert res.returncode == 0 and res.stdout.strip() == "alive", (
        f"exit status {res.returncode} (-11 is SIGSEGV)\n{res.stdout}\n{res.stderr}"
    )


# ------------------------------------------------------------ stop from a callback


def test_no_elected_after_a_stop_from_a_callback(client):
    """A stop from on_revoked of a step-down: the election won again
    meanwhile, and that term never reaches the callbacks."""
    seen = []
    stopped = threading.Event()
    el = None

    def on_elected(term):
        seen.append(("elected", term.token, stopped.is_set()))
        if term.token == 1:
            el.step_down()

    def on_revoked(term, reason):
        seen.append(("revoked", term.token, reason, stopped.is_set()))
        if reason == simba.Reason.STEPPED_DOWN:
            time.sleep(0.1)  # the election contends again and wins meanwhile
            el.stop()
            stopped.set()

    started = threading.Event()
    el = client.election("leader", lambda t: (started.wait(10), on_elected(t)), on_revoked)
    started.set()
    assert stopped.wait(10)
    time.sleep(0.5)
    assert seen == [("elected", 1, False), ("revoked", 1, simba.Reason.STEPPED_DOWN, False)], seen
    assert el.errors == []


# ------------------------------------------------------------ close of a frozen backend


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def frozen_redis(tmp_path):
    """A private redis-server, and a function that freezes it (SIGSTOP)."""
    exe = shutil.which("redis-server")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server not found")
        pytest.skip("redis-server not found")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0", lambda: proc.send_signal(signal.SIGSTOP)
    proc.send_signal(signal.SIGCONT)
    proc.kill()
    proc.wait()


def hold_and_freeze(frozen_redis):
    """A client of the private redis-server that holds the lock "job" and
    leads "leader", and then freezes the server."""
    url, freeze = frozen_redis
    c = simba.Client(url, lease=3)
    term = c.acquire("job", timeout=10)
    el = c.election("leader")
    el.wait_elected(10)
    freeze()
    return c, term, el


def wait_for_handles_freed():
    """Waits at most 30s for a close that goes on in the background to
    free every handle."""
    deadline = time.monotonic() + 30
    while any(v for k, v in simba.stats().items() if k != "goroutines") and time.monotonic() < deadline:
        time.sleep(0.1)


def test_close_of_a_frozen_backend_keeps_its_timeout(frozen_redis):
    c, term, _ = hold_and_freeze(frozen_redis)
    start = time.monotonic()
    with pytest.raises(simba.Timeout):
        c.close(timeout=0.5)
    took = time.monotonic() - start
    assert took < 0.8, f"close(timeout=0.5) took {took:.2f}s"
    assert not term.valid
    # The close goes on in the background; its handles are freed once it ends.
    wait_for_handles_freed()


def test_release_step_down_and_stop_of_a_frozen_backend_keep_their_timeout(frozen_redis):
    c, term, el = hold_and_freeze(frozen_redis)
    calls = [
        ("release", lambda: term.release(timeout=0.5)),
        ("step_down", lambda: el.step_down(timeout=0.5)),
        ("stop", lambda: el.stop(timeout=0.5)),
    ]
    for what, call in calls:
        start = time.monotonic()
        try:
            call()
        except (simba.Timeout, simba.BackendUnavailable, simba.BackendError):
            pass
        took = time.monotonic() - start
        assert took < 0.8, f"{what}(timeout=0.5) took {took:.2f}s"
    with pytest.raises(simba.Timeout):
        c.close(timeout=0.2)
    wait_for_handles_freed()


# ------------------------------------------------------------ timeouts of 0 and of the maximum


def test_timeout_zero_makes_one_attempt(memory_url):
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        a.acquire("warm", timeout=10).close()
        b.acquire("warm", timeout=10).close()
        with a.acquire("job", timeout=0) as term:
            assert term.valid
            start = time.monotonic()
            with pytest.raises(simba.LockTimeout):
                b.acquire("job", timeout=0)
            assert time.monotonic() - start < 1
        with a.lock("job", timeout=0.0005) as term:
            assert term.valid


def test_small_timeouts_round_up():
    assert _lib.millis("timeout", 0) == 0
    assert _lib.millis("timeout", 0.0005) == 1
    assert _lib.millis("timeout", 0.0001) == 1
    assert _lib.millis("timeout", 0.3) == 300
    assert _lib.millis("timeout", 1.0015) == 1002


def test_huge_timeouts_wait_the_maximum(memory_url):
    assert _lib.millis("timeout", 1e30) == 2**63 - 1
    assert _lib.millis("timeout", float("inf")) == 2**63 - 1
    with pytest.raises(simba.InvalidArgument):
        _lib.millis("timeout", float("nan"))
    with simba.Client(memory_url, lease=3) as c:
        with c.lock("job", timeout=1e30) as term:
            assert term.valid
            term.release(timeout=float("inf"))
        c.try_acquire("job", timeout=2**70).close()
    with pytest.raises(simba.InvalidArgument):
        simba.Client(memory_url, lease=1e30)


# ------------------------------------------------------------ credentials


def test_no_password_in_errors():
    for url in [
        "redis://user:Pw9secret@127.0.0.1:1/0",
        "redis://127.0.0.1:1/0?password=Pw9secret&protocol=9",
        "postgres://u:Pw9secret@127.0.0.1:1/db?sslmode=disable",
        "mysql://u:Pw9secret@tcp(127.0.0.1:1)/db",
    ]:
        with pytest.raises(simba.SimbaError) as info:
            simba.Client(url, open_timeout=1)
        assert "Pw9secret" not in str(info.value) and "Pw9secret" not in repr(info.value), str(info.value)
