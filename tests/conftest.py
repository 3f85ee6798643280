"""Test-wide guards: nothing in the suite may reach the network (loopback is allowed for the
app and browser tests)."""

from __future__ import annotations

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


# Test files that drive the app in Chromium: marked `browser` and `slow`.
BROWSER_FILES = {
    "test_browser.py",
    "test_space.py",
    "test_browser_live.py",
    "test_browser_dag.py",
    "test_browser_nav.py",
    "test_browser_signals.py",
    "test_browser_load.py",
    "test_browser_daily.py",
}


def pytest_collection_modifyitems(config, items):
    """Browser tests (they use tests/browser.py) are marked `browser` and `slow` automatically."""
    for item in items:
        if Path(str(item.fspath)).name in BROWSER_FILES:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


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
