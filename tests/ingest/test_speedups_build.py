"""The optional C speedups: built where CI says they must be, switched off by the variable, and
never a different answer (each function's own tests: tests/test_speedups_*.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rollout_graph.ingest import speedups


def test_built_where_required():
    if not os.environ.get("ROLLOUT_GRAPH_REQUIRE_SPEEDUPS"):
        pytest.skip("ROLLOUT_GRAPH_REQUIRE_SPEEDUPS is not set (CI sets it)")
    assert speedups.native is not None, "the C speedups did not build (setup.py, graph/ingest/csrc/)"
    assert speedups.status() == "on"


def test_the_variable_switches_them_off():
    code = "from rollout_graph.ingest import speedups; print(speedups.native is None, speedups.status())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "ROLLOUT_GRAPH_SPEEDUPS": "off"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split(maxsplit=1)
    assert out == ["True", "off (ROLLOUT_GRAPH_SPEEDUPS)\n"]


@pytest.mark.skipif(speedups.native is None, reason="the C speedups are not built")
def test_functions_refuse_what_is_not_bytes():
    for function in (speedups.native.sampled_entries, speedups.native.plain_ids):
        with pytest.raises(TypeError):
            function("text")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            function(bytearray(b"[]"))  # type: ignore[arg-type]


def test_the_python_side_names_every_function_the_module_has():
    import re
    from pathlib import Path

    table = (Path(__file__).resolve().parents[2] / "graph/ingest/csrc/module.c").read_text()
    registered = set(re.findall(r'^\s*\{"(\w+)", ', table, re.M))
    assert registered == set(speedups.FUNCTIONS)
