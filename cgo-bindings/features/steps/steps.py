"""The step vocabulary of the bindings' features: generic, parameterised
steps over nodes (clients), lease names, terms and callbacks."""

import queue
import threading
import time

from behave import given, then, when

import simba


def lease(context, name):
    return context.prefix + name


def node(context, n):
    return context.nodes[n]


def error_class(name):
    cls = getattr(simba, name, None)
    assert isinstance(cls, type) and issubclass(cls, Exception), f"no exception simba.{name}"
    return cls


def won(context, n, name, term):
    context.terms[(n, name)] = term
    context.tokens.setdefault(name, []).append(term.token)


@given('node "{n}" with a lease of {secs:g}s')
def step_node(context, n, secs):
    context.nodes[n] = simba.Client(context.url, lease=secs, identity=n)


@given('nodes "{a}" and "{b}" with a lease of {secs:g}s')
def step_nodes(context, a, b, secs):
    step_node(context, a, secs)
    step_node(context, b, secs)


@when('node "{n}" acquires "{name}" within {secs:g}s')
@given('node "{n}" acquired "{name}" within {secs:g}s')
@given('node "{n}" holds "{name}"')
def step_acquire(context, n, name, secs=10.0):
    won(context, n, name, node(context, n).acquire(lease(context, name), timeout=secs))


@when('node "{n}" tries "{name}"')
def step_try(context, n, name):
    won(context, n, name, node(context, n).try_acquire(lease(context, name)))


@when('node "{n}" acquires "{name}" within {secs:g}s in the background')
def step_acquire_background(context, n, name, secs):
    import threading

    q = queue.Queue()

    def run():
        try:
            q.put(node(context, n).acquire(lease(context, name), timeout=secs))
        except simba.SimbaError as e:
            q.put(e)

    threading.Thread(target=run, daemon=True).start()
    context.background = (n, name, q)


@then('the background acquisition of node "{n}" wins "{name}" within {secs:g}s')
def step_background_won(context, n, name, secs):
    bn, bname, q = context.background
    assert (bn, bname) == (n, name)
    got = q.get(timeout=secs)
    assert isinstance(got, simba.Term), f"background acquisition failed: {got!r}"
    won(context, n, name, got)


def assert_acquire_fails(n, name, error, acquire):
    """Asserts that acquire() fails with the exception of error; a term it
    wins is closed and fails the step."""
    try:
        t = acquire()
    except simba.SimbaError as e:
        assert isinstance(e, error_class(error)), f"got {type(e).__name__}: {e}"
        return
    t.close()
    raise AssertionError(f"node {n} acquired {name}")


@then('node "{n}" fails with {error} acquiring "{name}" within {secs:g}s')
def step_acquire_fails(context, n, name, error, secs):
    assert_acquire_fails(n, name, error, lambda: node(context, n).acquire(lease(context, name), timeout=secs))


@then('node "{n}" fails with {error} trying "{name}"')
def step_try_fails(context, n, name, error):
    assert_acquire_fails(n, name, error, lambda: node(context, n).try_acquire(lease(context, name)))


@then('node "{n}" fails with {error} using the name "{raw}"')
def step_bad_name(context, n, raw, error):
    # "(empty)" stands for ""; backslash escapes (\t, \x00) are decoded.
    name = "" if raw == "(empty)" else raw.encode("latin-1", "backslashreplace").decode("unicode_escape")
    for call in (
        lambda: node(context, n).acquire(name, timeout=1),
        lambda: node(context, n).try_acquire(name),
        lambda: node(context, n).election(name),
    ):
        try:
            call()
        except simba.SimbaError as e:
            assert isinstance(e, error_class(error)), f"got {type(e).__name__}: {e}"
            continue
        raise AssertionError(f"the name {name!r} was accepted")


@when('node "{n}" releases "{name}"')
def step_release(context, n, name):
    context.terms[(n, name)].release()


@when('node "{n}" closes')
def step_close(context, n):
    node(context, n).close()


@then('the term of node "{n}" on "{name}" is valid')
def step_valid(context, n, name):
    t = context.terms[(n, name)]
    assert t.valid and t.remaining > 0, f"term {t} valid {t.valid} remaining {t.remaining}"


@then('the term of node "{n}" on "{name}" has ended with {reason}')
def step_ended(context, n, name, reason):
    t = context.terms[(n, name)]
    assert not t.valid and t.remaining == 0
    assert t.reason == simba.Reason[reason], f"reason {t.reason!r}"


@then('the tokens of "{name}" strictly increase')
def step_tokens(context, name):
    tokens = context.tokens[name]
    assert len(tokens) >= 2 and all(b > a for a, b in zip(tokens, tokens[1:])), tokens


# Elections


def record(context, n, name):
    q = queue.Queue()
    context.seen[(n, name)] = q
    return (
        lambda t: q.put(f"elected {t.token}"),
        lambda t, r: q.put(f"revoked {t.token} {r.name}"),
    )


@when('node "{n}" starts the election "{name}"')
@given('node "{n}" started the election "{name}"')
def step_start(context, n, name):
    on_elected, on_revoked = record(context, n, name)
    context.elections[(n, name)] = node(context, n).election(lease(context, name), on_elected, on_revoked)


@when('node "{n}" starts the election "{name}" and stops it from its first callback')
def step_start_stop_in_callback(context, n, name):
    start_calling_back(context, n, name, lambda el, t: el.stop())  # from the callback: does not wait for itself


def start_calling_back(context, n, name, elected, revoked=None):
    """Starts the election name on node n with callbacks that record their
    calls and then call elected(election, term) and revoked(election, term,
    reason) (None: nothing), which may call the election."""
    on_elected, on_revoked = record(context, n, name)
    holder = {}
    started = threading.Event()  # the first callback may come before election() returned

    def on_elected_then(t):
        on_elected(t)
        started.wait(10)
        elected(holder["el"], t)

    def on_revoked_then(t, r):
        on_revoked(t, r)
        if revoked is not None:
            revoked(holder["el"], t, r)

    holder["el"] = node(context, n).election(lease(context, name), on_elected_then, on_revoked_then)
    context.elections[(n, name)] = holder["el"]
    started.set()


@then('node "{n}" fails with {error} starting the election "{name}"')
def step_start_fails(context, n, name, error):
    try:
        node(context, n).election(lease(context, name))
    except simba.SimbaError as e:
        assert isinstance(e, error_class(error)), f"got {type(e).__name__}: {e}"
        return
    raise AssertionError("the election started")


@then('node "{n}" is elected for "{name}" within {secs:g}s')
def step_elected(context, n, name, secs):
    t = context.elections[(n, name)].wait_elected(secs)
    if context.tokens.get(name, [None])[-1] != t.token:
        context.tokens.setdefault(name, []).append(t.token)


@then('node "{n}" is not elected for "{name}" within {secs:g}s')
def step_not_elected(context, n, name, secs):
    time.sleep(secs)
    assert context.elections[(n, name)].term is None


@when('node "{n}" steps down from "{name}" for {secs:g}s')
def step_step_down(context, n, name, secs):
    context.elections[(n, name)].step_down(cooldown=secs)


@when('node "{n}" stops the election "{name}"')
def step_stop(context, n, name):
    context.elections[(n, name)].stop()


@then('node "{n}" saw for "{name}" within {secs:g}s')
def step_saw(context, n, name, secs):
    """The table lists the callbacks in order; tokens are named by the order
    of the terms this node saw for the name (T1, T2, ...), and each term's
    token must be above the one before it. Tokens are not consecutive on
    every backend: Redis takes them from its clock."""
    q = context.seen[(n, name)]
    order = []
    for row in context.table:
        got = q.get(timeout=secs).split()
        token = int(got[1])
        if token not in order:
            assert not order or token > order[-1], f"token {token} after {order[-1]}: tokens must increase"
            order.append(token)
        got = " ".join([got[0], f"T{order.index(token) + 1}"] + got[2:])
        assert got == row["callback"], f"callback {got!r}, want {row['callback']!r}"


@then('node "{n}" saw nothing more for "{name}" within {secs:g}s')
def step_nothing_more(context, n, name, secs):
    q = context.seen[(n, name)]
    try:
        extra = q.get(timeout=secs)
    except queue.Empty:
        return
    raise AssertionError(f"unexpected callback {extra}")


@then('the snapshot of node "{n}" shows "{name}" as {state}')
def step_snapshot(context, n, name, state):
    # The session opens in the background: wait for it to be live, 5s at most.
    until = time.monotonic() + 5
    while True:
        s = node(context, n).snapshot()
        got = {x["name"]: x for x in s["leases"]}.get(lease(context, name))
        if s["session"]["status"] == "LIVE" and got is not None and got["state"] == state:
            return
        assert time.monotonic() < until, s
        time.sleep(0.05)


@then('opening "{url}" fails with {error}')
def step_open_fails(context, url, error):
    try:
        simba.Client(url, open_timeout=2).close()
    except simba.SimbaError as e:
        assert isinstance(e, error_class(error)), f"got {type(e).__name__}: {e}"
        assert "hunter2" not in str(e)
        return
    raise AssertionError(f"{url} opened")


@then('node "{n}" waiting for "{name}" without a timeout is interrupted within {secs:g}s')
def step_interrupted(context, n, name, secs):
    """A real SIGINT while the main thread waits: KeyboardInterrupt must come
    within secs of it, whatever the holder does."""
    import os
    import signal
    import threading

    sent = {}

    def interrupt():
        time.sleep(0.2)  # the wait is under way
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        t = node(context, n).acquire(lease(context, name))
    except KeyboardInterrupt:
        took = time.monotonic() - sent["at"]
        assert took < secs, f"KeyboardInterrupt {took:.3f}s after SIGINT"
        return
    t.close()
    raise AssertionError(f"node {n} acquired {name} instead of being interrupted")


@then('node "{n}" holds no lease')
def step_holds_nothing(context, n):
    leases = node(context, n).snapshot()["leases"]
    assert leases == [], leases


@when('node "{n}" starts the election "{name}", steps down in its first callback and stops it from the revoked one')
def step_start_step_down_stop(context, n, name):
    stepped = threading.Event()

    def elected(el, t):
        if not stepped.is_set():
            stepped.set()
            el.step_down()

    def revoked(el, t, r):
        if r == simba.Reason.STEPPED_DOWN:
            time.sleep(0.1)  # the election contends again and wins meanwhile
            el.stop()

    start_calling_back(context, n, name, elected, revoked)


# Holders


@then('node "{n}" sees {who} holding "{name}" within {secs:g}s')
def step_sees_holder(context, n, who, name, secs):
    """who is nobody or node "x": the identity of x's client is its node name.
    The holder's token joins the tokens of the name."""
    want = None if who == "nobody" else who.removeprefix('node "').removesuffix('"')
    until = time.monotonic() + secs
    while True:
        h = node(context, n).holder(lease(context, name))
        got = h.identity if h is not None else None
        if got == want:
            if h is not None:
                assert h.token > 0 and h.session, h
                tokens = context.tokens.setdefault(name, [])
                if not tokens or tokens[-1] != h.token:
                    tokens.append(h.token)
            return
        assert time.monotonic() < until, f"node {n} sees {h} holding {name}, want {who}"
        time.sleep(0.05)


# Events


@given('node "{n}" listens to its events keeping {capacity:d}')
def step_listen(context, n, capacity):
    context.streams[n] = node(context, n).events(capacity=capacity)
    context.missed[n] = 0


@when('node "{n}" takes and releases "{name}" {times:d} times')
def step_cycles(context, n, name, times):
    for _ in range(times):
        t = node(context, n).acquire(lease(context, name), timeout=10)
        won(context, n, name, t)
        t.release()


def event_line(context, e):
    """An event as the tables of the features write it: its kind, the lease
    without the scenario's prefix, lock for a lock's term, the reason."""
    words = [str(e.kind)]
    if e.name:
        words.append(e.name.removeprefix(context.prefix))
    if e.lock:
        words.append("lock")
    if e.kind == simba.EventKind.REVOKED:
        words.append(str(e.reason))
    return " ".join(words)


@then('node "{n}" gets the events within {secs:g}s')
def step_events(context, n, secs):
    """The table lists events in the order they must come; events of other
    kinds and lines between them are skipped. A DROPPED row matches an
    event that reports at least one drop."""
    stream = context.streams[n]
    until = time.monotonic() + secs
    for row in context.table:
        want = row["event"]
        while True:
            left = until - time.monotonic()
            assert left > 0, f"no {want!r} event within {secs}s"
            e = stream.get(timeout=left)
            if e is None:
                continue
            if e.kind == simba.EventKind.DROPPED:
                assert e.dropped > 0, e
                context.missed[n] += e.dropped
            if event_line(context, e) == want:
                break


@then('node "{n}" was told of every event it missed')
def step_told_of_drops(context, n):
    stream = context.streams[n]
    while True:
        try:
            e = stream.get(timeout=0.3)
        except simba.ClientClosed:
            break
        if e is None:
            break
        if e.kind == simba.EventKind.DROPPED:
            context.missed[n] += e.dropped
    assert context.missed[n] == stream.dropped, f"told of {context.missed[n]} drops, {stream.dropped} dropped"


# Leader work and groups


class Work:
    """Leader work or a group's partition work running on a thread of the
    test: it records the partitions it works on (None for leader work) and
    waits for each term's end; stop() cancels it and waits for it."""

    def __init__(self, context, n, name, partitions=None):
        self.cancel = simba.CancelToken()
        self.mu = threading.Lock()
        self.working = {}  # partition -> term
        self.error = None
        client = node(context, n)

        def work(partition, term):
            with self.mu:
                assert partition not in self.working, f"partition {partition} worked on twice"
                self.working[partition] = term
            with context.mu:
                key = (name, partition)
                if key in context.workers:
                    context.overlaps.append(key)
                context.workers[key] = n
            try:
                term.wait_ended()
            finally:
                with context.mu:
                    if context.workers.get(key) == n:
                        del context.workers[key]
                with self.mu:
                    del self.working[partition]

        def run():
            try:
                if partitions is None:
                    client.run_while_leader(lease(context, name), lambda t: work(None, t), cancel=self.cancel)
                else:
                    client.run_group(lease(context, name), partitions, work, cancel=self.cancel)
            except BaseException as e:  # noqa: BLE001 - reported by stop()
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def count(self):
        with self.mu:
            return len(self.working)

    def stop(self):
        self.cancel.cancel()
        self.thread.join(15)
        assert not self.thread.is_alive(), "the work did not stop within 15s"
        self.cancel.close()
        assert self.error is None, f"the work failed: {self.error!r}"


@when('node "{n}" runs leader work on "{name}" in the background')
def step_run_work(context, n, name):
    context.works[(n, name)] = Work(context, n, name)


@when('node "{n}" runs the group "{name}" of {count:d} partitions in the background')
def step_run_group(context, n, name, count):
    context.works[(n, name)] = Work(context, n, name, partitions=count)


@when('node "{n}" stops its work on "{name}"')
def step_stop_work(context, n, name):
    context.works.pop((n, name)).stop()


@then('node "{n}" works on {count:d} partitions of "{name}" within {secs:g}s')
def step_partitions(context, n, count, name, secs):
    work = context.works[(n, name)]
    until = time.monotonic() + secs
    while work.count() != count:
        assert time.monotonic() < until, f"node {n} works on {work.count()} partitions of {name}, want {count}"
        time.sleep(0.02)


@then('no partition of "{name}" had two nodes working on it')
def step_no_overlap(context, name):
    with context.mu:
        overlaps = [key for key in context.overlaps if key[0] == name]
    assert not overlaps, f"worked on by two nodes at once: {overlaps}"


# Semaphores: a permit is remembered under a label of the scenario's own,
# and its token joins the tokens of the semaphore.


@given('node "{n}" holds a permit of "{name}" of {permits:d} as "{label}"')
@then('node "{n}" holds a permit of "{name}" of {permits:d} as "{label}"')
def step_permit(context, n, name, permits, label):
    t = node(context, n).acquire_permit(lease(context, name), permits, timeout=10)
    context.terms[("permit", label)] = t
    context.tokens.setdefault(name, []).append(t.token)


@then('node "{n}" fails with {error} trying a permit of "{name}" of {permits:d}')
def step_permit_try_fails(context, n, name, error, permits):
    assert_acquire_fails(n, name, error, lambda: node(context, n).try_acquire_permit(lease(context, name), permits))


@then('node "{n}" fails with {error} acquiring a permit of "{name}" of {permits:d} within {secs:g}s')
def step_permit_fails(context, n, name, error, permits, secs):
    assert_acquire_fails(
        n, name, error, lambda: node(context, n).acquire_permit(lease(context, name), permits, timeout=secs)
    )


@when('node "{n}" acquires a permit of "{name}" of {permits:d} within {secs:g}s in the background')
def step_permit_background(context, n, name, permits, secs):
    q = queue.Queue()

    def run():
        try:
            q.put(node(context, n).acquire_permit(lease(context, name), permits, timeout=secs))
        except simba.SimbaError as e:
            q.put(e)

    threading.Thread(target=run, daemon=True).start()
    context.background = (n, name, q)


@then('the background acquisition of node "{n}" wins a permit within {secs:g}s')
def step_permit_background_won(context, n, secs):
    bn, name, q = context.background
    assert bn == n
    got = q.get(timeout=secs)
    assert isinstance(got, simba.Term), f"background acquisition failed: {got!r}"
    context.terms[("permit", "background")] = got
    context.tokens.setdefault(name, []).append(got.token)


@when('permit "{label}" is released')
def step_permit_release(context, label):
    context.terms[("permit", label)].release()
