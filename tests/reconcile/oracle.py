"""The frameworks' own code as a test oracle: a worker process in the writers venv
(tests/reconcile/oracle_worker.py) answering one case per line.

Which interpreter: this one when it has the framework installed, else ``ROLLOUT_GRAPH_WRITERS_PYTHON``
(trl 1.16.0 and openenv 0.10.0; verifiers too unless ``ROLLOUT_GRAPH_VERIFIERS_PYTHON`` names a venv
of its own: verifiers 0.4.0 and openenv 0.10.0 pin different ``mcp`` majors). Missing, the tests
skip saying so; with ``ROLLOUT_GRAPH_REQUIRE_WRITERS=1`` (CI) they fail instead.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.support.json_worker import JsonWorker

WORKER = Path(__file__).with_name("oracle_worker.py")
PINS = {"trl": "1.16.0", "openenv": "0.10.0", "verifiers": "0.4.0"}
NEEDS = {"trl": ("trl",), "trl-openenv": ("trl", "openenv"), "openenv": ("openenv",), "verifiers": ("verifiers",)}
HOW = "build it with `bash .ci/writers-env DIR` and set ROLLOUT_GRAPH_WRITERS_PYTHON / ROLLOUT_GRAPH_VERIFIERS_PYTHON"


def required() -> bool:
    return os.environ.get("ROLLOUT_GRAPH_REQUIRE_WRITERS") == "1"


def _installed(package: str) -> bool:
    """A real package, not a namespace a folder of that name on the path makes."""
    spec = importlib.util.find_spec(package)
    return spec is not None and spec.origin not in (None, "namespace")


def interpreter(framework: str) -> str | None:
    """The python that has the framework's packages, or None."""
    if all(_installed(p) for p in NEEDS[framework]):
        return sys.executable
    names = (
        ["ROLLOUT_GRAPH_VERIFIERS_PYTHON", "ROLLOUT_GRAPH_WRITERS_PYTHON"]
        if framework == "verifiers"
        else ["ROLLOUT_GRAPH_WRITERS_PYTHON"]
    )
    for name in names:
        path = os.environ.get(name)
        if path and Path(path).exists():
            return path
    return None


class Oracle(JsonWorker):
    """One worker process for one framework."""

    def __init__(self, framework: str, python: str) -> None:
        self.framework = framework
        hint = f" (does it have {', '.join(NEEDS[framework])}?)"
        super().__init__([python, str(WORKER), framework], framework, hint)


def open_oracle(framework: str) -> Oracle:
    """Start the framework's oracle, or skip (fail when required) naming what is missing."""
    python = interpreter(framework)
    if python is None:
        message = f"no interpreter with {', '.join(NEEDS[framework])} for the {framework} oracle: {HOW}"
        if required():
            pytest.fail(message)
        pytest.skip(message)
    oracle = Oracle(framework, python)
    for package, pinned in PINS.items():
        if package in oracle.versions and oracle.versions[package] != pinned:
            oracle.close()
            message = f"the {framework} oracle has {package} {oracle.versions[package]}, the reconciler follows {pinned}: {HOW}"
            if required():
                pytest.fail(message)
            pytest.skip(message)
    return oracle
