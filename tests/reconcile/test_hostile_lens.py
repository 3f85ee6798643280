"""The lens on hostile input (tests/support/hostile.py): ``inspect --reconcile all`` and
``export --as`` never fail on a trace the loader reads, whatever its calls hold (invalid ids,
bad logprobs, message-only calls, duplicate ids...)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_graph.analysis.reconcile import FRAMEWORKS
from rollout_graph.cli import main
from tests.support.hostile import Case, cases

SMALL = [c for c in cases() if not c.bomb]


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.name)
def test_every_framework_reads_a_hostile_trace(case: Case, tmp_path, capsysbinary):
    path = tmp_path / f"{case.name}{case.suffix}"
    case.write(path)
    assert main(["inspect", str(path), "--json", "--tokens", "--reconcile", "all", "--no-cache", *case.flags]) == 0
    payload = json.loads(capsysbinary.readouterr().out)
    for session in payload["sessions"]:
        assert list(session["reconcile"]) == list(FRAMEWORKS)
        for found in session["reconcile"].values():
            s = found["summary"]
            assert s["n_delivered_tokens"] + s["n_dropped_tokens"] == s["n_sampled_tokens"]
            for row in found["rows"]:
                assert len(row["input_ids"]) == len(row["loss_mask"]) == len(row["logprobs"]) == row["length"]
    out = Path(tmp_path / "rows.jsonl")
    assert main(["export", str(path), "--as", "verifiers", "--out", str(out), "--no-cache", *case.flags]) == 0
