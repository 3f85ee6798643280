"""Fixtures of the conformance suite: the OpenEnv oracle process (tests/conformance/writers.py)."""

from __future__ import annotations

import pytest

from tests.conformance.writers import Oracle, python_for


@pytest.fixture(scope="session")
def openenv_oracle():
    oracle = Oracle(python_for("openenv"))
    yield oracle
    oracle.close()
