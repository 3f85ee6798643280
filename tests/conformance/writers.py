"""The writers' own code as a test oracle: a worker process in the writers' venv
(tests/conformance/oracle_worker.py) answering one JSON case per line.

Which interpreter: ``ROLLOUT_GRAPH_WRITERS_PYTHON`` (openenv==0.10.0, trl==1.16.0 with CPU torch)
and, for verifiers, ``ROLLOUT_GRAPH_VERIFIERS_PYTHON`` (verifiers==0.4.0 pins another ``mcp``
major than openenv, so it has a venv of its own); ``bash .ci/writers-env DIR`` builds both and
prints the two variables. When one is missing the tests that need it skip, saying so; with
``ROLLOUT_GRAPH_REQUIRE_WRITERS=1`` (CI) they fail instead. This interpreter itself is used when
it has the package (nothing here installs anything).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.json_worker import JsonWorker

WORKER = Path(__file__).with_name("oracle_worker.py")
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "writers"
PINS = {"openenv": "0.10.0", "trl": "1.16.0", "verifiers": "0.4.0"}
VARIABLE = {"openenv": "ROLLOUT_GRAPH_WRITERS_PYTHON", "trl": "ROLLOUT_GRAPH_WRITERS_PYTHON"}
VARIABLE["verifiers"] = "ROLLOUT_GRAPH_VERIFIERS_PYTHON"
HOW = "build them with `bash .ci/writers-env DIR` and set ROLLOUT_GRAPH_WRITERS_PYTHON / ROLLOUT_GRAPH_VERIFIERS_PYTHON"


def required() -> bool:
    return os.environ.get("ROLLOUT_GRAPH_REQUIRE_WRITERS") == "1"


def python_for(package: str) -> str:
    """The interpreter that has ``package`` at its pinned version, or skip (fail under
    ROLLOUT_GRAPH_REQUIRE_WRITERS=1) naming what is missing."""
    candidates = [os.environ.get(VARIABLE[package], "")]
    if importlib.util.find_spec(package) is not None:
        candidates.append(sys.executable)
    for python in filter(None, candidates):
        if Path(python).exists() and _version(python, package) == PINS[package]:
            return python
    message = f"no python with {package}=={PINS[package]} for the conformance tests: {HOW}"
    if required():
        pytest.fail(message)
    pytest.skip(message)


def _version(python: str, package: str) -> str | None:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


class Oracle(JsonWorker):
    """One worker process: ``run(case)`` sends a JSON case and returns the JSON answer."""

    def __init__(self, python: str) -> None:
        super().__init__([python, str(WORKER)], "OpenEnv")

    def run(self, case: dict[str, Any]) -> dict[str, Any]:
        answer = super().run(case)
        if "crash" in answer:
            raise RuntimeError(f"the OpenEnv oracle failed on the case: {answer['crash']}")
        return answer
