"""Fixtures of the tests of the simba package. The library comes from
$SIMBA_LIBRARY (the Go tests of cgo-bindings set it to the libsimba.so they
built). Tests that need Redis read SIMBA_TEST_REDIS_URL; without it they
skip, except under CI, where they fail."""

import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import simba  # noqa: E402

_stores = itertools.count()


@pytest.fixture
def memory_url():
    """A memory:// URL of a store no other test uses."""
    return f"memory://pytest-{os.getpid()}-{next(_stores)}"


@pytest.fixture
def redis_url():
    url = os.environ.get("SIMBA_TEST_REDIS_URL")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("SIMBA_TEST_REDIS_URL is not set (make test sets it)")
        pytest.skip("SIMBA_TEST_REDIS_URL is not set")
    return url


@pytest.fixture
def client(memory_url):
    c = simba.Client(memory_url, lease=3)
    yield c
    c.close()


@pytest.fixture(autouse=True)
def no_leaked_handles():
    """Every test ends with every handle freed."""
    yield
    s = simba.stats()
    live = {k: v for k, v in s.items() if k != "goroutines" and v}
    assert not live, f"handles left open: {live}"


@pytest.fixture
def unique():
    """A lease name no other run uses (shared backends keep their tokens)."""
    return f"py-{os.getpid()}-{next(_stores)}"
