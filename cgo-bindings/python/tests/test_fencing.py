"""The fenced file keeps fencingtest's properties, and a stale writer (a
paused process whose term ended) is refused."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import simba
from fenced import FencedFile, StaleToken

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def fenced(tmp_path):
    return FencedFile(str(tmp_path / "fenced"))


def test_fresh_state(fenced):
    assert fenced.read() == (0, "")


def test_higher_equal_lower(fenced):
    fenced.write(5, "a")
    fenced.write(7, "b")  # higher: accepted
    fenced.write(7, "c")  # equal: accepted (a retry within one term)
    assert fenced.read() == (7, "c")
    with pytest.raises(StaleToken):
        fenced.write(6, "d")  # lower: refused, nothing changes
    assert fenced.read() == (7, "c")


def test_zero_never_overwrites(fenced):
    fenced.write(1, "a")
    with pytest.raises(StaleToken):
        fenced.write(0, "b")
    assert fenced.read() == (1, "a")


def test_large_tokens(fenced):
    fenced.write(2**63 - 2, "a")
    fenced.write(2**63 - 1, "b")
    with pytest.raises(StaleToken):
        fenced.write(2**63 - 2, "c")
    assert fenced.read() == (2**63 - 1, "b")


def test_atomic(fenced):
    def writer(token):
        for _ in range(20):
            try:
                fenced.write(token, str(token))
            except StaleToken:
                pass

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fenced.read() == (8, "8")


def test_durable(fenced):
    fenced.write(3, "x")
    assert FencedFile(fenced.path).read() == (3, "x")


def test_stale_writer_in_one_process(memory_url, fenced):
    """A's term ends (here by release, as if it lost the lock); B writes with
    its higher token; A's late write with its old token is refused."""
    with simba.Client(memory_url, lease=3) as a, simba.Client(memory_url, lease=3) as b:
        ta = a.acquire("report", timeout=5)
        fenced.write(ta.token, "A's first write")
        ta.release()
        with b.lock("report", timeout=5) as tb:
            assert tb.token > ta.token
            fenced.write(tb.token, "B's write")
        with pytest.raises(StaleToken):
            fenced.write(ta.token, "A's late write")
        ta.close()
    assert fenced.read()[1] == "B's write"


PAUSED = r"""
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import simba
from fenced import FencedFile, StaleToken
f = FencedFile(sys.argv[4])
with simba.Client(sys.argv[3], lease=1) as c:
    term = c.acquire("stale-" + sys.argv[5], timeout=10)
    print(term.token, flush=True)
    sys.stdin.readline()                       # paused here (SIGSTOP) meanwhile
    valid = term.valid
    try:
        f.write(term.token, "late write")      # a stale writer does not check
        print("accepted", valid, flush=True)
    except StaleToken:
        print("refused", valid, flush=True)
    term.close()
"""


def test_stale_writer_paused_process(redis_url, unique, fenced):
    """A process is paused past its lease (a GC pause, a stopped VM), another
    takes the lock and writes; the first resumes and writes with its old
    token: the fenced file refuses it, and the term reads as ended."""
    child = subprocess.Popen(
        [sys.executable, "-c", PAUSED, os.path.join(HERE, ".."), HERE, redis_url, fenced.path, unique],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        old = int(child.stdout.readline())
        os.kill(child.pid, signal.SIGSTOP)
        with simba.Client(redis_url, lease=1) as c:
            with c.lock("stale-" + unique, timeout=10) as term:  # won once A's session expired
                assert term.token > old
                fenced.write(term.token, "new holder")
                os.kill(child.pid, signal.SIGCONT)
                child.stdin.write("go\n")
                child.stdin.flush()
                assert child.stdout.readline().split() == ["refused", "False"]
        assert fenced.read() == (term.token, "new holder")
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait()
