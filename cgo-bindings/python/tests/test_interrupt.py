"""Ctrl-C during a wait for a lock or a leadership: KeyboardInterrupt comes
within about 100 ms, even without a timeout and with a holder that never
releases, and nothing the interrupted wait won stays held (R-LOCK-2).

Each case runs in a child process that gets a real SIGINT, so that a wait
that ignores it fails the test instead of hanging the runner."""

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import simba

url, mode, name = sys.argv[2], sys.argv[3], sys.argv[4]
holder = simba.Client(url, lease=3)
waiter = simba.Client(url, lease=3)
other = simba.Client(url, lease=3)

def free():
    # The name is free once the holder gave it back: the interrupted
    # waiter must not have taken it meanwhile, now or a little later.
    time.sleep(0.3)
    with other.try_acquire(name):
        pass
    leases = [l for l in waiter.snapshot()["leases"] if l["state"] == "HOLDING"]
    assert leases == [], leases

if mode == "race":
    # The holder releases at about the instant of the interrupt, many
    # times: whatever the waiter won then is given back.
    for i in range(int(sys.argv[5])):
        term = holder.acquire(name, timeout=10)
        delay = (i % 10) / 1000.0
        def release_and_interrupt():
            # After the main thread's first 50 ms slice, so that the
            # wait that wins is the waiting thread's.
            time.sleep(0.08)
            threading.Thread(target=term.release).start()
            time.sleep(delay)
            os.kill(os.getpid(), 2)
        threading.Thread(target=release_and_interrupt).start()
        try:
            won = waiter.acquire(name)
            # The wait won before the interrupt came: the interrupt arrives
            # in the line below or soon after, like any Ctrl-C in the code.
            won.close()
            time.sleep(0.1)
        except KeyboardInterrupt:
            pass
        term.close()
        free()
    print("free", flush=True)
    sys.exit(0)

term = holder.acquire(name, timeout=10)
print("waiting", flush=True)
try:
    if mode == "acquire":
        waiter.acquire(name)
    elif mode == "lock":
        with waiter.lock(name):
            pass
    print("not interrupted", flush=True)
    sys.exit(1)
except KeyboardInterrupt:
    print("interrupted", flush=True)
term.close()
free()
print("free", flush=True)
"""


def spawn(script, *args):
    child = subprocess.Popen(
        [sys.executable, "-c", script, os.path.join(HERE, ".."), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child.lines = queue.Queue()

    def pump():
        for line in child.stdout:
            child.lines.put(line.strip())
        child.lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return child


def run_child(url, mode, name, *extra):
    return spawn(CHILD, url, mode, name, *extra)


def expect(child, line, timeout=10):
    try:
        got = child.lines.get(timeout=timeout)
    except queue.Empty:
        got = f"nothing within {timeout}s"
    if got != line:
        child.kill()
        child.wait()
        pytest.fail(f"the child printed {got!r}, want {line!r}; stderr: {child.stderr.read()}")


def interrupt_waiting_child(child, settle, after=("free",)):
    """Sends SIGINT to child settle seconds after it printed "waiting",
    checks that it printed "interrupted" within 150 ms, then each line of
    after, and that it exited with 0; the child is killed whatever happens."""
    try:
        expect(child, "waiting")
        time.sleep(settle)
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        expect(child, "interrupted")
        latency = time.monotonic() - sent
        for line in after:
            expect(child, line)
        assert child.wait(10) == 0, child.stderr.read()
        assert latency < 0.15, f"KeyboardInterrupt came {latency * 1000:.0f} ms after SIGINT"
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("mode", ["acquire", "lock"])
def test_ctrl_c_interrupts_the_wait(memory_url, unique, mode):
    child = run_child(memory_url, mode, unique)
    interrupt_waiting_child(child, 0.3)  # the wait is under way


LEADING = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import simba
url, name = sys.argv[2], sys.argv[3]
leader = simba.Client(url, lease=3)
waiter = simba.Client(url, lease=3)
other = simba.Client(url, lease=3)
el = leader.election(name)
el.wait_elected(10)
print("waiting", flush=True)
try:
    with waiter.election(name).leading():
        print("not interrupted", flush=True)
        sys.exit(1)
except KeyboardInterrupt:
    print("interrupted", flush=True)
el.stop()
time.sleep(0.3)
with other.try_acquire(name + "-unused"):
    pass
assert [l for l in waiter.snapshot()["leases"]] == [], waiter.snapshot()
print("free", flush=True)
"""


def test_ctrl_c_interrupts_leading(memory_url, unique):
    child = spawn(LEADING, memory_url, unique)
    interrupt_waiting_child(child, 0.3)


def test_ctrl_c_at_the_instant_of_a_win_leaves_nothing_held(memory_url, unique):
    child = run_child(memory_url, "race", unique, "30")
    try:
        expect(child, "free", timeout=120)
        assert child.wait(10) == 0, child.stderr.read()
    finally:
        child.kill()
        child.wait()


def test_ctrl_c_over_redis(redis_url, unique):
    """Across processes too: the name is free for another process afterwards."""
    child = run_child(redis_url, "acquire", unique)
    interrupt_waiting_child(child, 0.3)


LEADING_SLOW_STOP = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import simba
url, name = sys.argv[2], sys.argv[3]
c = simba.Client(url, lease=3)
el = c.election(name, on_revoked=lambda term, reason: time.sleep(2))
try:
    with el.leading(10):
        print("waiting", flush=True)
        time.sleep(30)
except KeyboardInterrupt:
    print("interrupted", flush=True)
assert el.wait_released(10)
assert [l for l in c.snapshot()["leases"] if l["state"] == "HOLDING"] == [], c.snapshot()
print("free", flush=True)
"""


def test_ctrl_c_in_leading_does_not_wait_for_a_slow_stop(memory_url, unique):
    """The stop's last on_revoked takes 2 s: KeyboardInterrupt does not wait for it."""
    child = spawn(LEADING_SLOW_STOP, memory_url, unique)
    interrupt_waiting_child(child, 0.2)


FROZEN_TRY = r"""
import os, socket, sys, threading, time, urllib.parse
sys.path.insert(0, sys.argv[1])
import simba
url, name = sys.argv[2], sys.argv[3]
target = urllib.parse.urlsplit(url)
frozen = threading.Event()

def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            while frozen.is_set():
                time.sleep(0.01)
            b.sendall(data)
    except OSError:
        pass

listener = socket.create_server(("127.0.0.1", 0))

def serve():
    while True:
        conn, _ = listener.accept()
        up = socket.create_connection((target.hostname, target.port))
        threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
        threading.Thread(target=pipe, args=(up, conn), daemon=True).start()

threading.Thread(target=serve, daemon=True).start()
proxied = urllib.parse.urlunsplit(target._replace(netloc=f"127.0.0.1:{listener.getsockname()[1]}"))
c = simba.Client(proxied, lease=6)
c.try_acquire(name + "-warm").close()
frozen.set()  # the backend stops answering: the try waits for its answer
print("waiting", flush=True)
try:
    if len(sys.argv) > 4 and sys.argv[4] == "holder":
        c.holder(name)
    else:
        c.try_acquire(name)
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
except simba.SimbaError as e:
    print("failed", type(e).__name__, e, flush=True)
os._exit(0)
"""


def test_ctrl_c_interrupts_a_try_acquire_that_waits_for_a_frozen_backend(redis_url, unique):
    child = spawn(FROZEN_TRY, redis_url, unique)
    interrupt_waiting_child(child, 0.3, after=())


def test_ctrl_c_interrupts_a_holder_query_to_a_frozen_backend(redis_url, unique):
    """The answer would take up to a renew interval (2 s): Ctrl-C does not wait for it."""
    child = spawn(FROZEN_TRY, redis_url, unique, "holder")
    interrupt_waiting_child(child, 0.3, after=())


ENGINE = r"""
import sys
sys.path.insert(0, sys.argv[1])
import simba
url, mode, name = sys.argv[2], sys.argv[3], sys.argv[4]
c = simba.Client(url, lease=3)
other = simba.Client(url, lease=3)
print("waiting", flush=True)
try:
    if mode == "run_while_leader":
        c.run_while_leader(name, lambda term: term.wait_ended())
    elif mode == "run_group":
        c.run_group(name, 2, lambda partition, term: term.wait_ended())
    elif mode == "events":
        with c.events() as events:
            while True:
                events.get()
    elif mode == "wait_ended":
        with c.lock(name, timeout=10) as term:
            term.wait_ended()
    print("not interrupted", flush=True)
    sys.exit(1)
except KeyboardInterrupt:
    print("interrupted", flush=True)
# Every lease was given back: another client takes each at once.
for lease in (name, name + ".0", name + ".1"):
    with other.try_acquire(lease):
        pass
assert c.snapshot()["leases"] == [], c.snapshot()
print("free", flush=True)
"""


@pytest.mark.parametrize("mode", ["run_while_leader", "run_group", "events", "wait_ended"])
def test_ctrl_c_interrupts_leader_work_groups_and_waits(memory_url, unique, mode):
    """Ctrl-C stops a run of leader work or a group (after the work returned,
    and the leases are free), and ends a wait for an event or a term's end."""
    child = spawn(ENGINE, memory_url, mode, unique)
    interrupt_waiting_child(child, 0.4)
