"""The PyPI writers' fixtures are what those writers write today: each is regenerated into a
temporary folder by tools/make_writer_fixtures.py with the writers' own venv and compared with
the committed files (tests/conformance/writers.py: ``ROLLOUT_GRAPH_WRITERS_PYTHON``,
``ROLLOUT_GRAPH_VERIFIERS_PYTHON``; skipped without them, failing under
``ROLLOUT_GRAPH_REQUIRE_WRITERS=1``).

Compared as data (JSON parsed, JSONL line by line, Parquet row by row). Normalised, and only
these, because they are not deterministic by nature: a Harbor result's ``task_id`` (the path of
the temporary task folder; its last two parts are kept) and ``wall_s`` (a measured duration).
Every id OpenEnv and verifiers mint at random comes from a seeded generator in the generator
scripts, so ids are compared exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.writers import FIXTURES, ROOT, python_for

TOOL = ROOT / "tools" / "make_writer_fixtures.py"


def normalise(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: normalise(v) for k, v in value.items()}
        if isinstance(out.get("task_id"), str):
            out["task_id"] = "/".join(Path(out["task_id"]).parts[-2:])
        if "wall_s" in out and "phase_timings" in out:  # a HarborRolloutResult's measured duration
            out["wall_s"] = None
        return out
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def read(path: Path) -> Any:
    if path.suffix == ".json":
        return normalise(json.loads(path.read_text()))
    if path.suffix == ".jsonl":
        return [normalise(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return table.schema.names, table.to_pylist()
    return path.read_bytes()


def same_files(committed: Path, regenerated: Path) -> None:
    want = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file() and p.name != "README.md")
    got = sorted(p.relative_to(regenerated) for p in regenerated.rglob("*") if p.is_file() and p.name != "README.md")
    assert got == want, f"{committed.name}: other files were written"
    for rel in want:
        assert read(regenerated / rel) == read(committed / rel), (
            f"{committed.name}/{rel} differs from what the writer writes now"
        )


def regenerate(tmp_path: Path, writer: str, *python: str) -> Path:
    done = subprocess.run(
        [sys.executable, str(TOOL), writer, "--out", str(tmp_path), *python],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp_path


def test_openenv_fixtures_are_what_openenv_writes(tmp_path):
    out = regenerate(tmp_path, "openenv", "--writers-python", python_for("openenv"))
    same_files(FIXTURES / "openenv", out / "openenv")


def test_the_bundled_openenv_sample_is_what_export_session_writes(tmp_path):
    target = tmp_path / "fix-config-bug.json"
    regenerate(tmp_path, "sample", "--writers-python", python_for("openenv"), "--sample-out", str(target))
    assert read(target) == read(ROOT / "sample_traces" / "openenv" / "fix-config-bug.json")


def test_verifiers_fixture_is_what_verifiers_writes(tmp_path):
    out = regenerate(tmp_path, "verifiers", "--verifiers-python", python_for("verifiers"))
    same_files(FIXTURES / "verifiers", out / "verifiers")


@pytest.mark.slow
def test_trl_fixtures_are_what_trl_writes(tmp_path):
    out = regenerate(tmp_path, "trl", "--writers-python", python_for("trl"))
    same_files(FIXTURES / "trl", out / "trl")
