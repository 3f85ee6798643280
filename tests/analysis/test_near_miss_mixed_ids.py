"""A trace mixing calls with and without prompt ids in one fork (the reported crash: the near-miss
pass asserted "call 'c07' has no prompt ids" inside ``common_prefix``). ``rg.load`` must load every
such trace: each call's prompt ids are dropped in turn, and in pairs, and every load must finish
with no error logged by the near-miss pass, causality kept, and no near miss naming or comparing a
call whose prompt ids are missing by its ids."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import pytest

import rollout_graph as rg

REPRO = Path(__file__).resolve().parents[1] / "fixtures" / "near_miss_mixed_ids.jsonl"
RECORDS = [json.loads(line) for line in REPRO.read_text().splitlines() if line.strip()]


def _without_ids(drop: tuple[int, ...], tmp_path: Path) -> Path:
    out = tmp_path / f"drop-{'-'.join(map(str, drop)) or 'none'}.jsonl"
    lines = []
    for k, record in enumerate(RECORDS):
        record = json.loads(json.dumps(record))
        if k in drop:
            record["response"].pop("prompt_token_ids", None)
        lines.append(json.dumps(record))
    out.write_text("\n".join(lines) + "\n")
    return out


def _load(path: Path, caplog: pytest.LogCaptureFixture):
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rollout_graph.near_miss"):
        result = rg.load(path)
    failed = [r.getMessage() for r in caplog.records if r.name == "rollout_graph.near_miss"]
    assert not failed, failed
    return result


def _check(result) -> None:
    assert result
    for r in result.values():
        for node, m in r.near_misses.items():
            assert m.earlier < m.later == node
            assert r.calls[m.earlier].prompt_ids is not None or m.common_prefix == 0
        for node, m in r.replaced_by.items():
            assert m.earlier == node < m.later


def test_the_reported_trace_loads_and_names_its_breaks(caplog):
    assert RECORDS[7]["response"].get("prompt_token_ids") is None  # c07: the call without prompt ids
    result = _load(REPRO, caplog)
    _check(result)
    (r,) = result.values()
    named = {r.calls[i].node_id: (m.kind, r.calls[m.earlier].node_id) for i, m in r.near_misses.items()}
    assert named["c05"] == ("retry", "c04")  # the identical prompt re-sent
    assert all(of != "c07" for _, of in named.values())  # no ids: never the call a prefix is shared with
    assert r.calls[7].node_id == "c07" and r.topology.parents[7] is not None  # linked by its messages


@pytest.mark.parametrize("drop", [(k,) for k in range(len(RECORDS))] + list(itertools.combinations(range(4, 9), 2)))
def test_any_call_without_prompt_ids_loads(drop, tmp_path, caplog):
    _check(_load(_without_ids(drop, tmp_path), caplog))


def test_a_failing_pass_is_logged_and_the_trace_still_loads(monkeypatch, caplog):
    from rollout_graph.analysis.near_miss import search

    def broken(*args, **kwargs):
        raise AssertionError("a trace no test foresaw")

    monkeypatch.setattr(search, "_Pass", broken)
    with caplog.at_level(logging.WARNING, logger="rollout_graph.near_miss"):
        result = rg.load(REPRO)
    (r,) = result.values()
    assert r.near_misses == {} and len(r.calls) == len(RECORDS)
    messages = [m.getMessage() for m in caplog.records if m.name == "rollout_graph.near_miss"]
    assert [m.split("(")[1].split(")")[0] for m in messages] == ["near_misses", "replacements"]
    assert all("gen-8" in m and "AssertionError: a trace no test foresaw" in m for m in messages)
