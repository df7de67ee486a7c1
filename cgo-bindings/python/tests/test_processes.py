"""Two processes contend for one lock on Redis (memory:// is one process only)."""

import os
import subprocess
import sys

import pytest

import simba

HERE = os.path.dirname(os.path.abspath(__file__))

HOLDER = r"""
import sys
sys.path.insert(0, sys.argv[1])
import simba
with simba.Client(sys.argv[2], lease=3) as c:
    with c.lock(sys.argv[3], timeout=10) as term:
        print(term.token, flush=True)
        sys.stdin.readline()   # hold until the parent says
print("released", flush=True)
"""


def spawn(url, name):
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, os.path.join(HERE, ".."), url, name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_two_processes(redis_url, unique):
    child = spawn(redis_url, unique)
    try:
        child_token = int(child.stdout.readline())
        with simba.Client(redis_url, lease=3) as c:
            with pytest.raises(simba.LockHeld):
                c.try_acquire(unique)
            with pytest.raises(simba.LockTimeout):
                c.acquire(unique, timeout=0.3)
            child.stdin.write("release\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "released"
            with c.lock(unique, timeout=10) as term:
                assert term.token > child_token
    finally:
        child.kill()
        child.wait()
