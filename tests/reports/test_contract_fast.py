"""The session builder of the JSON contract (``_Nodes``) gives what :func:`node_json` gives, one
call at a time: the same keys in the same order and the same values, on every bundled sample and
test fixture, with a signals file joined, and on random unfinished groups (issue 24)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.cli.common import load_inputs
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.reports.contract import _Nodes, node_json, session_json

ROOT = Path(__file__).resolve().parents[2]


def _dump(value) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)


def _same_nodes(rollout) -> None:
    plain = [node_json(rollout, i) for i in range(len(rollout.calls))]
    fast = _Nodes(rollout).all()
    assert fast == plain
    assert [list(d) for d in fast] == [list(d) for d in plain]  # key order: the bytes of the contract
    assert _dump(fast) == _dump(plain)
    assert all(type(d["trainable"]) is bool and type(d["unfinished"]) is bool for d in fast)


def _rollouts(folder: Path):
    loaded = load_paths([folder])
    return [analyse(s) for s in loaded.sessions.values()]


@pytest.fixture(scope="module")
def corpus():
    return [r for folder in (ROOT / "sample_traces", ROOT / "tests" / "fixtures") for r in _rollouts(folder)]


def test_every_sample_and_fixture_builds_the_same_nodes(corpus):
    assert len(corpus) > 20
    for rollout in corpus:
        _same_nodes(rollout)
    # the branches that differ from node_json's are taken somewhere in the corpus
    assert any(r.topology.unfinished for r in corpus)
    assert any(r.near_misses for r in corpus)
    assert any(r.topology.discarded for r in corpus)


def test_with_a_signals_file_joined_the_nodes_are_the_same():
    inputs = load_inputs(
        [ROOT / "sample_traces" / "vllm"], signals=[ROOT / "sample_traces" / "signals" / "samples.signals.jsonl"]
    )
    joined = [r for r in inputs.rollouts if r.signals is not None and r.signals.calls]
    assert joined
    for rollout in inputs.rollouts:
        _same_nodes(rollout)


def test_the_session_json_uses_the_session_builder(corpus):
    for rollout in corpus[:5]:
        assert session_json(rollout, False)["nodes"] == [node_json(rollout, i) for i in range(len(rollout.calls))]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_unfinished_groups_give_the_same_nodes(corpus, data):
    rollout = data.draw(st.sampled_from([r for r in corpus if len(r.calls) >= 2]))
    n = len(rollout.calls)
    groups = data.draw(
        st.lists(st.lists(st.integers(0, n - 1), min_size=0, max_size=min(n, 6)), min_size=0, max_size=4)
    )
    assume(groups != rollout.topology.unfinished)
    topology = dataclasses.replace(rollout.topology, unfinished=groups)
    _same_nodes(dataclasses.replace(rollout, topology=topology))
