"""The documented Python API: docs/python-api.md runs as written, and the networkx graph and the
pandas frames agree with the `inspect --json` contract, on the samples and on generated rollouts."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings

import rollout_graph as rg
from rollout_graph.core.records import SessionInput
from rollout_graph.pipeline import analyse
from rollout_graph.reports.contract import session_json
from rollout_graph.resources import SAMPLES
from tests.support.builders import calls_from_tokens, examples, harness_traces

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"


def doc_examples() -> list[tuple[str, str]]:
    return re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", DOC.read_text(), re.S)


def test_every_python_api_example_prints_what_the_doc_says(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # the examples use paths relative to the repository
    blocks = doc_examples()
    assert len(blocks) >= 4
    namespace: dict = {}
    for code, expected in blocks:
        code = code.replace("/tmp/", f"{tmp_path}/")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), namespace)  # the doc's own code, nothing from a trace
        assert out.getvalue() == expected, code
    assert (tmp_path / "fix-config-bug.graphml").stat().st_size > 0


def assert_agrees_with_contract(rollout: rg.Rollout) -> None:
    contract = session_json(rollout, with_tokens=False)
    nodes = {n["node_id"]: n for n in contract["nodes"]}
    g = rollout.to_networkx()
    assert set(g.nodes) == set(nodes)
    assert {(u, v) for u, v in g.edges} == {(n["parent_id"], k) for k, n in nodes.items() if n["parent_id"]}
    for node_id, attrs in g.nodes(data=True):
        n = nodes[node_id]
        assert attrs["n_prompt"] == n["n_prompt"] and attrs["n_sampled"] == n["n_sampled"]
        assert attrs["discarded"] == n["discarded"]
        assert attrs["kind"] == (
            "root"
            if n["parent_id"] is None
            else "fork"
            if n["n_children"] > 1
            else "leaf"
            if n["n_children"] == 0
            else "inner"
        )
        assert attrs.get("finish_reason") == n["finish_reason"]
    for _u, v, data in g.edges(data=True):
        assert data["linked_by"] == nodes[v]["linked_by"]
    assert nx.is_directed_acyclic_graph(g)
    assert sum(1 for n in g if g.in_degree(n) == 0) == contract["stats"]["n_roots"]
    assert sum(1 for n in g if g.out_degree(n) == 0) == contract["stats"]["n_leaves"]

    frame = rollout.nodes_frame()
    assert frame["node_id"].tolist() == [n["node_id"] for n in contract["nodes"]]
    assert [None if p != p else p for p in frame["parent_id"].tolist()] == [n["parent_id"] for n in contract["nodes"]]
    assert frame["root_id"].tolist() == [n["root_id"] for n in contract["nodes"]]
    assert frame["discarded"].tolist() == [n["discarded"] for n in contract["nodes"]]
    levels = {lvl: 0 for lvl in ("FATAL", "WARN", "INFO")}
    for f in contract["findings"]:
        if f["node_id"] is not None and f.get("leaf_id") is None:
            levels[f["level"]] += 1
    assert int(frame["n_fatal"].sum()) + int(frame["n_warn"].sum()) + int(frame["n_info"].sum()) <= sum(
        levels.values()
    ) + len(contract["findings"])

    rows = rollout.sequences_frame()
    seqs = contract["sequences"]
    assert rows["leaf_id"].tolist() == [s["leaf_id"] for s in seqs]
    assert rows["role"].tolist() == [s["role"] for s in seqs]
    assert rows["n_trainable"].tolist() == [s["n_trainable"] for s in seqs]
    assert rows["prompt_len"].tolist() == [s["prompt_len"] for s in seqs]
    assert rows["n_nodes"].tolist() == [s["n_turns"] for s in seqs]
    assert int(rows["n_trainable"].sum()) == contract["stats"]["n_trainable_tokens"]


@pytest.mark.parametrize("path", ["vllm", "openenv", "eval"])
def test_graph_and_frames_agree_with_the_contract_on_the_samples(path):
    rollouts = rg.load(SAMPLES / path)
    assert rollouts and rollouts.report.records == rollouts.report.loaded + len(rollouts.report.skipped)
    for rollout in rollouts.values():
        assert_agrees_with_contract(rollout)


@settings(max_examples=examples(300), deadline=None)
@given(harness_traces())
def test_graph_and_frames_agree_with_the_contract_on_generated_rollouts(spec):
    assert_agrees_with_contract(analyse(SessionInput("s", calls_from_tokens(spec))))


def test_near_miss_edges_carry_their_kind():
    rollout = rg.load(SAMPLES / "vllm")["fix-config-bug"]
    g = rollout.to_networkx(near_misses=True)
    extra = [(u, v, d) for u, v, d in g.edges(data=True) if d["linked_by"] == "near_miss"]
    assert extra and all(d["kind"] for _, _, d in extra)
    assert len(extra) == g.number_of_edges() - rollout.to_networkx().number_of_edges()


def test_reprs_are_short_and_load_rejects_missing_paths(tmp_path):
    rollouts = rg.load(SAMPLES / "vllm")
    assert len(repr(rollouts)) < 200 and all(len(repr(r)) < 200 for r in rollouts.values())
    assert len(repr(rollouts["fix-config-bug"].calls[0])) < 2000
    with pytest.raises(FileNotFoundError):
        rg.load(tmp_path / "missing.jsonl")


def test_export_graphml_round_trips_through_networkx(tmp_path):
    from rollout_graph.cli import main

    out = tmp_path / "rollouts.graphml"
    assert main(["export", str(SAMPLES / "vllm"), "--format", "graphml", "--out", str(out)]) == 0
    g = nx.read_graphml(out)
    rollouts = rg.load(SAMPLES / "vllm")
    assert g.number_of_nodes() == sum(len(r.calls) for r in rollouts.values())
    assert g.nodes["fix-config-bug/c04"]["session_id"] == "fix-config-bug"
    exact = sum(r.to_networkx().number_of_edges() for r in rollouts.values())
    assert sum(1 for *_, d in g.edges(data=True) if d["linked_by"] != "near_miss") == exact
    single = tmp_path / "one.graphml"
    assert (
        main(["export", str(SAMPLES / "vllm"), "--session", "list-todos", "--format", "graphml", "--out", str(single)])
        == 0
    )
    assert set(nx.read_graphml(single).nodes) == set(rollouts["list-todos"].node_ids)
    assert not list(tmp_path.glob(".*.tmp"))
