"""Test-wide guards: nothing in the suite may reach the network (loopback is allowed for the
app and browser tests)."""

from __future__ import annotations

import inspect
import os
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis profiles: `dev` is quick while editing, `ci` (the default) is thorough.
# Choose with HYPOTHESIS_PROFILE=dev.
settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The parsed-trace cache (docs/performance.md) of everything the suite starts goes to a folder of
# its own, never the user's ~/.cache.
if "ROLLOUT_GRAPH_CACHE" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["ROLLOUT_GRAPH_CACHE"] = tempfile.mkdtemp(prefix="rollout-graph-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ROLLOUT_GRAPH_CACHE"], True)


# A test that drives the app in Chromium lives in tests/browser/ (marked browser and slow by its
# folder) or says so itself: `pytestmark = [pytest.mark.browser, pytest.mark.slow]`. A test that
# opens a browser page without the marks fails at collection, so `-m "not browser"` never starts
# Chromium by surprise.
_BROWSER_USES = ("browser_page(", "require_chromium(")


def _uses_the_browser(item) -> bool:
    sources = [getattr(item, "function", None)]
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    sources += [d.func for defs in fixtures.values() for d in defs if d.baseid and d.baseid in item.nodeid]
    for fn in sources:
        try:
            code = inspect.getsource(fn) if fn is not None else ""
        except (OSError, TypeError):
            continue
        if any(use in code for use in _BROWSER_USES):
            return True
    return False


# Markers set per folder: every test under tests/browser/ drives Chromium.
FOLDER_MARKS = {"browser": ("browser", "slow")}
_TESTS = Path(__file__).resolve().parent


def _folder_of(item) -> str:
    try:
        return Path(str(item.path)).resolve().relative_to(_TESTS).parts[0]
    except (ValueError, IndexError):
        return ""


def pytest_collection_modifyitems(config, items):
    """Mark each test by its folder, then fail a test that opens a browser page without the
    ``browser`` and ``slow`` marks (one outside tests/browser/ must say so itself)."""
    for item in items:
        for mark in FOLDER_MARKS.get(_folder_of(item), ()):
            if not item.get_closest_marker(mark):
                item.add_marker(getattr(pytest.mark, mark))
    unmarked = [
        item.nodeid
        for item in items
        if _uses_the_browser(item) and not (item.get_closest_marker("browser") and item.get_closest_marker("slow"))
    ]
    if unmarked:
        raise pytest.UsageError(
            "these tests drive Chromium but are not marked browser and slow "
            "(add `pytestmark = [pytest.mark.browser, pytest.mark.slow]`): " + ", ".join(unmarked)
        )


_LOOPBACK = ("127.", "::1", "localhost")


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    real_connect = socket.socket.connect

    def guarded(sock, address):
        host = address[0] if isinstance(address, tuple) else str(address)
        if sock.family == socket.AF_UNIX or str(host).startswith(_LOOPBACK):
            return real_connect(sock, address)
        raise AssertionError(f"test tried to reach the network: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(autouse=True)
def own_environment():
    """The command line sets ``ROLLOUT_GRAPH_*`` variables for the process it runs in (``view
    --signals``); a test that calls it in-process must not leave them to the next test."""
    before = {k: v for k, v in os.environ.items() if k.startswith("ROLLOUT_GRAPH_")}
    yield
    for key in [k for k in os.environ if k.startswith("ROLLOUT_GRAPH_") and k not in before]:
        del os.environ[key]
    os.environ.update(before)
