"""The frameworks' oracles, one worker process each for the whole session (tests/reconcile/oracle.py)."""

from __future__ import annotations

import pytest

from tests.reconcile.oracle import Oracle, open_oracle

_OPEN: dict[str, Oracle] = {}


def _oracle(framework: str) -> Oracle:
    if framework not in _OPEN:
        _OPEN[framework] = open_oracle(framework)
    return _OPEN[framework]


@pytest.fixture(scope="session")
def oracles():
    """``oracles(name)`` starts (once) and returns the oracle of a framework, or skips."""
    yield _oracle
    for oracle in _OPEN.values():
        oracle.close()
    _OPEN.clear()
