"""The DAG layout (graph/analysis/layout.py, dag_view): compactions drawn after the call they
compacted, lanes packed, no two nodes on one spot, one-call chains drawn as their call."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rollout_graph.analysis.chains import compacted_calls
from rollout_graph.analysis.layout import GAP, pack
from rollout_graph.analysis.near_miss import COMPACTION
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.ui.builders.dag import dag_figure, dag_view, line_segments
from tests.analysis.test_near_miss import END, GEN, NL, SYSTEM, TOOL, USER, rollout
from tests.support.builders import agent_records, rollout_of

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def compacting_rollout():
    """n0 a first attempt (discarded), n1 its retry that the agent continues (n2..n4), then n5 a
    compaction keeping the system prompt and a summary, continued by n6. The near miss of n5 names
    n4: the history it summarised is n4's."""
    head = SYSTEM + USER + GEN
    spec = [(head, [50, 51, END]), (head, [52, 53, END])]
    prompt = head + [52, 53, END, NL] + TOOL + [60, END, NL] + GEN
    for k in range(3):
        sampled = [70 + k, END]
        spec.append((prompt, sampled))
        prompt = prompt + sampled + [NL] + TOOL + [61 + k, END, NL] + GEN
    summary = SYSTEM + [5, 90, 91, 92, 93] + GEN
    spec += [(summary, [80, END]), (summary + [80, END, NL] + TOOL + [62, END, NL] + GEN, [81])]
    return rollout(spec)


def test_a_compaction_is_drawn_after_the_call_it_compacted_not_beside_the_first_call():
    r = compacting_rollout()
    miss = r.near_misses[5]
    assert (miss.kind, miss.earlier) == (COMPACTION, 4)  # the near miss names the call it compacted
    assert r.topology.discarded.get(0) == 1 and r.topology.parents[4] == 3
    assert compacted_calls(r) == {5: 4}  # the history it replaced ended with n4
    for near_misses in (True, False):
        view = dag_view(r, near_misses=near_misses)
        assert view.x[5] == view.x[4] + 1, (near_misses, view.x)  # one step after n4 ...
        assert view.x[5] > view.x[0] + 1  # ... never in n0's column or the one after it
        assert view.x[6] == view.x[5] + 1
    view = dag_view(r, near_misses=True)
    assert view.y[5] == view.y[4]  # drawn in line with the call it compacted, linked by a dashed near miss
    links = line_segments(dag_figure(r, near_misses=True), "near misses")
    assert links == [((view.x[4], -view.y[4]), (view.x[5], -view.y[5]))]


@pytest.mark.parametrize("folder", ["openenv", "vllm"])
def test_the_bundled_compaction_is_drawn_after_the_call_it_compacted(folder):
    loaded = load_paths([SAMPLES / folder])
    r = analyse(next(s for name, s in loaded.sessions.items() if name.startswith("fix-config-bug")))
    ids = r.node_ids
    c = {name: ids.index(name) for name in ("c01", "c17", "c18", "c19")}
    # c18 compacts the history (the first attempt, discarded); c19 re-sends c18's prompt and goes on
    assert r.near_misses[c["c18"]].kind == COMPACTION and r.near_misses[c["c19"]].earlier == c["c18"]
    assert compacted_calls(r) == {c["c18"]: c["c17"], c["c19"]: c["c17"]}
    for near_misses in (True, False):
        view = dag_view(r, near_misses=near_misses)
        assert view.x[c["c19"]] == view.x[c["c17"]] + 1
        assert view.x[c["c18"]] == view.x[c["c19"]]  # its discarded retry beside it, not before it
        assert view.y[c["c18"]] != view.y[c["c19"]]


def _spots(placed, nodes):
    return [(placed.x[v], placed.y[v]) for v in nodes]


def _random_forest(rng: random.Random, n: int) -> dict[int, int | None]:
    parent: dict[int, int | None] = {}
    for v in range(n):
        r = rng.random()
        parent[v] = None if v == 0 or r < 0.08 else (v - 1 if r < 0.75 else rng.randrange(v))
    return parent


@pytest.mark.parametrize("seed", range(30))
def test_no_two_nodes_share_a_spot_and_no_two_branches_overlap_in_a_lane(seed):
    rng = random.Random(seed)
    n = rng.randrange(1, 300)
    parent = _random_forest(rng, n)
    length = {v: rng.choice((1.0, 1.0, 3.0)) for v in range(n)}
    placed = pack(range(n), parent, length)
    spots = _spots(placed, range(n))
    assert len(set(spots)) == n
    assert placed.n_lanes == 1 + max(placed.y.values())
    # each edge goes right, by its length, to a lane at or below its parent's
    for v, p in parent.items():
        if p is not None:
            assert placed.x[v] == placed.x[p] + length[v] and placed.y[v] >= placed.y[p]
    # a lane holds runs of nodes that never come closer than the gap kept between branches
    for lane in range(placed.n_lanes):
        xs = sorted(placed.x[v] for v in range(n) if placed.y[v] == lane)
        assert all(b - a >= min(1.0, GAP) for a, b in zip(xs, xs[1:], strict=False))


def test_conversations_one_after_another_reuse_the_top_lanes():
    """Forty conversations of ten calls, each starting after the previous ended (a compaction
    that is not recognised, a new task): before packing each stepped one lane down (40 lanes)."""
    parent: dict[int, int | None] = {}
    for v in range(400):
        parent[v] = None if v % 10 == 0 else v - 1
    placed = pack(range(400), parent)
    assert placed.n_lanes <= 2
    assert max(placed.x.values()) <= 400


def test_a_side_call_sits_under_the_main_line_where_it_happened():
    parent: dict[int, int | None] = {v: (None if v == 0 else v - 1) for v in range(10)}
    parent[10] = None  # a side call arriving after call 9
    parent.update({v: v - 1 for v in range(11, 20)})  # the main line goes on
    parent[11] = 9
    placed = pack(range(20), parent)
    assert placed.y[10] == 1 and placed.x[10] == placed.x[9]
    assert all(placed.y[v] == 0 for v in range(10) if v != 10)


def test_after_draws_a_root_one_step_right_of_its_call_in_its_lane_or_below():
    parent: dict[int, int | None] = {0: None, 1: 0, 2: 1, 3: None, 4: 3}
    placed = pack(range(5), parent, after={3: 2})
    assert (placed.x[3], placed.x[4]) == (placed.x[2] + 1, placed.x[2] + 2)
    assert placed.y[3] == placed.y[2] == 0  # the main line goes on (no edge is drawn: it is a root)
    parent = {0: None, 1: 0, 2: 1, 3: 2, 4: None}  # 2 has a child of its own, where 4 would go
    placed = pack(range(5), parent, after={4: 2})
    assert placed.x[4] == placed.x[3] and placed.y[4] == placed.y[3] + 1


@pytest.mark.parametrize("n_calls", [1000, 5000])
def test_harness_shaped_rollouts_use_few_lanes(n_calls):
    """agent_records: chains of 150 calls with a retry every 25, each compacted into a new root,
    a 6-call subagent after each chain. Without near-miss links, lanes used to step down once per
    conversation (1,000 calls: 20 lanes, 5,000: 92); now the main line keeps the top lane."""
    r = rollout_of(agent_records(n_calls, session="big"))
    for collapse in (True, False):
        for near_misses in (True, False):
            view = dag_view(r, near_misses=near_misses, collapse=collapse)
            assert view.n_lanes <= 3, (collapse, near_misses, view.n_lanes)
        assert len({(view.x[v], view.y[v]) for v in view.visible}) == len(view.visible)


def test_a_one_call_chain_is_drawn_as_its_call_not_a_bar():
    # n0 a fork (n1, n2), n1 alone between it and n3, another fork (n4, n5): a run of one call
    head = SYSTEM + USER + GEN
    spec = [(head, [50, END])]
    p1 = head + [50, END, NL] + GEN
    spec += [(p1, [51, END]), (p1, [52, END])]  # a fork: n1 continued, n2 a sibling
    p2 = p1 + [51, END, NL] + GEN
    spec += [(p2, [53, END])]  # n3: one call between the fork's branch and its children
    p3 = p2 + [53, END, NL] + GEN
    spec += [(p3, [54, END]), (p3, [55, END])]
    r = rollout(spec)
    view = dag_view(r, collapse=True)
    assert all(len(chain.calls) > 1 for chain in view.chains)
    assert set(view.visible) | {c for chain in view.chains for c in chain.calls} == set(range(len(spec)))
