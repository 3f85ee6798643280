"""Finding your way, without a browser: DAG filters (pure matching), findings triage groups, and
the DAG figure's dimmed and ringed overlays."""

from __future__ import annotations

import numpy as np

from rollout_graph.analysis.filters import ROOT, CallFilter, facet_values, matching
from rollout_graph.core.records import FATAL, INFO, WARN
from rollout_graph.reports.triage import EXPLANATIONS, explanation, finding_groups
from rollout_graph.ui.builders.dag import dag_figure
from tests.support.builders import TOOLS, Turn, rollout_of, vllm_chat

TURNS = [
    Turn("c0", [1, 2, 3], [4, 5], logprobs=[-0.25, -1.5], tools=TOOLS),
    Turn("c1", [1, 2, 3, 4, 5, 6], [7], logprobs=[-0.75], tools=TOOLS),  # a discarded retry
    Turn("c2", [1, 2, 3, 4, 5, 6], [8, 9], logprobs=[-9.0, -0.5], tools=TOOLS),
    Turn("c3", [1, 2, 3, 4, 5, 6, 8, 9, 10], [11], logprobs=[-0.125], tools=TOOLS, finish="length"),
    Turn("t0", [50, 51], [52], logprobs=[-0.5]),
]


def rollout():
    return rollout_of([vllm_chat(t) for t in TURNS])


def names(r, keep):
    return [r.calls[i].node_id for i in np.flatnonzero(keep)]


def test_no_filter_keeps_every_call():
    r = rollout()
    assert not CallFilter().active
    assert matching(r, CallFilter()).all()


def test_each_facet():
    r = rollout()
    assert names(r, matching(r, CallFilter(finish_reasons=frozenset({"length"})))) == ["c3"]
    assert names(r, matching(r, CallFilter(roles=frozenset({"discarded"})))) == ["c1"]
    assert names(r, matching(r, CallFilter(linked_by=frozenset({ROOT})))) == ["c0", "t0"]
    assert names(r, matching(r, CallFilter(linked_by=frozenset({"tokens"})))) == ["c1", "c2", "c3"]
    assert names(r, matching(r, CallFilter(models=frozenset({"m"})))) == ["c0", "c1", "c2", "c3", "t0"]
    assert names(r, matching(r, CallFilter(models=frozenset({"other"})))) == []
    assert names(r, matching(r, CallFilter(logprob_below=-5.0))) == ["c2"]
    assert names(r, matching(r, CallFilter(logprob_below=-1.0))) == ["c0", "c2"]
    assert names(r, matching(r, CallFilter(codes=frozenset({"truncated_turn"})))) == ["c3"]
    assert names(r, matching(r, CallFilter(levels=frozenset({WARN}), codes=frozenset({"discarded_turns"})))) == ["c1"]
    assert names(r, matching(r, CallFilter(levels=frozenset({FATAL})))) == []


def test_facets_combine_with_and_values_with_or():
    r = rollout()
    either = CallFilter(finish_reasons=frozenset({"length", "stop"}))
    assert len(names(r, matching(r, either))) == 5
    both = CallFilter(finish_reasons=frozenset({"stop"}), logprob_below=-1.0)
    assert names(r, matching(r, both)) == ["c0", "c2"]


def test_facet_values_count_calls():
    values = facet_values(rollout())
    assert values["finish_reasons"] == {"stop": 4, "length": 1}
    assert values["linked_by"][ROOT] == 2
    assert values["codes"]["discarded_turns"] == 1


def test_triage_groups_by_code_with_explanations_and_calls():
    r = rollout()
    groups = finding_groups(r)
    levels = [g.level for g in groups]
    assert levels == sorted(levels, key=[FATAL, WARN, INFO].index)
    by_code = {g.code: g for g in groups}
    assert by_code["discarded_turns"].nodes == [r.index_of("c1")]
    assert by_code["truncated_turn"].nodes == [r.index_of("c3")]
    assert by_code["multiple_roots"].nodes == []  # about the rollout, no call
    assert by_code["truncated_turn"].explanation == EXPLANATIONS["truncated_turn"]
    mild = finding_groups(r, most_severe_first=False)
    assert mild[0].level == INFO and mild[-1].level == WARN
    assert explanation("not_a_code") == "See the finding's detail."


def test_every_documented_code_has_an_explanation():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "semantics.md").read_text()
    section = doc.split("## Findings", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    documented = {code for cell in first_cells for code in cell.split("`")[1::2]}
    assert "logprob_misalign" in documented and "no_logprobs" in documented
    assert documented - set(EXPLANATIONS) == set()


def test_dag_overlays_dim_and_ring_without_moving_the_calls_trace():
    r = rollout()
    plain = dag_figure(r)
    fig = dag_figure(r, dimmed=frozenset({1, 4}), highlighted=frozenset({3}))
    assert fig.data[1].name == "calls" and len(fig.data) == len(plain.data) + 2
    dimmed = next(t for t in fig.data if t.name == "dimmed")
    ringed = next(t for t in fig.data if t.name == "highlighted")
    calls = fig.data[1]
    assert list(dimmed.x) == [calls.x[1], calls.x[4]] and list(dimmed.y) == [calls.y[1], calls.y[4]]
    assert list(ringed.x) == [calls.x[3]]
    assert dimmed.hoverinfo == "skip" and ringed.hoverinfo == "skip"  # clicks reach the calls underneath
