"""The step vocabulary of the bindings' features: generic, parameterised
steps over nodes (clients), lease names, terms and callbacks."""

import queue
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


@then('node "{n}" fails with {error} acquiring "{name}" within {secs:g}s')
def step_acquire_fails(context, n, name, error, secs):
    try:
        t = node(context, n).acquire(lease(context, name), timeout=secs)
    except simba.SimbaError as e:
        assert isinstance(e, error_class(error)), f"got {type(e).__name__}: {e}"
        return
    t.close()
    raise AssertionError(f"node {n} acquired {name}")


@then('node "{n}" fails with {error} trying "{name}"')
def step_try_fails(context, n, name, error):
    try:
        t = node(context, n).try_acquire(lease(context, name))
    except simba.SimbaError as e:
        assert isinstance(e, error_class(error)), f"got {type(e).__name__}: {e}"
        return
    t.close()
    raise AssertionError(f"node {n} acquired {name}")


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
    on_elected, on_revoked = record(context, n, name)
    holder = {}

    def elected(t):
        on_elected(t)
        holder["el"].stop()  # from the callback: does not wait for itself

    holder["el"] = node(context, n).election(lease(context, name), elected, on_revoked)
    context.elections[(n, name)] = holder["el"]


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
    on_elected, on_revoked = record(context, n, name)
    holder = {}

    def elected(t):
        on_elected(t)
        if not holder.get("stepped"):
            holder["stepped"] = True
            holder["el"].step_down()

    def revoked(t, r):
        on_revoked(t, r)
        if r == simba.Reason.STEPPED_DOWN:
            time.sleep(0.1)  # the election contends again and wins meanwhile
            holder["el"].stop()

    holder["el"] = node(context, n).election(lease(context, name), elected, revoked)
    context.elections[(n, name)] = holder["el"]
