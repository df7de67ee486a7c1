"""The world of the features of the bindings: the backend URL, the nodes
(one simba.Client each) and what their callbacks saw.

The backend is -D backend=memory (default) or -D backend=redis (URL from
SIMBA_TEST_REDIS_URL). The library is loaded from $SIMBA_LIBRARY."""

import itertools
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import simba  # noqa: E402

_runs = itertools.count()


def before_all(context):
    backend = context.config.userdata.get("backend", "memory")
    if backend == "memory":
        context.base_url = None
    elif backend == "redis":
        url = os.environ.get("SIMBA_TEST_REDIS_URL")
        if not url:
            raise RuntimeError("-D backend=redis needs SIMBA_TEST_REDIS_URL")
        context.base_url = url
    else:
        raise RuntimeError(f"unknown backend {backend!r} (memory or redis)")
    context.backend = backend


def before_scenario(context, scenario):
    run = next(_runs)
    context.url = context.base_url or f"memory://features-{os.getpid()}-{run}"
    # Lease names are unique per scenario, so that a shared backend's tokens
    # and leases of earlier runs do not matter.
    context.prefix = f"f{os.getpid()}-{run}-"
    context.nodes = {}
    context.terms = {}  # (node, name) -> Term
    context.tokens = {}  # name -> tokens won, in order
    context.elections = {}  # (node, name) -> Election
    context.seen = {}  # (node, name) -> callback events
    context.error = None
    context.streams = {}  # node -> simba.Events
    context.missed = {}  # node -> drops its stream reported
    context.works = {}  # (node, name) -> leader or group work running
    context.workers = {}  # (name, partition) -> the node working on it
    context.overlaps = []  # (name, partition) worked on by two nodes at once
    context.mu = threading.Lock()


def after_scenario(context, scenario):
    for w in context.works.values():
        w.cancel.cancel()
        w.thread.join(15)
        w.cancel.close()
    for s in context.streams.values():
        s.close()
    for c in context.nodes.values():
        c.close()
    live = {k: v for k, v in simba.stats().items() if k != "goroutines" and v}
    assert not live, f"handles left open after the scenario: {live}"
