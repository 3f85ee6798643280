"""The rings the browser draws over an unchanged DAG figure (views/builders/dag/rings.py ``rings``,
``Targets``; views/panels/dag_client): each shortcut is compared with the figure itself, the
validating path: ``Targets`` with the calls and chains traces, the covers with the labels the
boxed id overlaps in the figure's own geometry, and the payload is JSON data whose one text is escaped."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.chains import linear_chains, pinned_calls
from rollout_graph.ui.builders.dag import (
    CHAINS,
    HIT_R,
    PLOT_WIDTH,
    RING_BOX,
    RING_COVER,
    RING_HIT,
    RING_SELECTED,
    SELECTED_R,
    box_goes_below,
    dag_drawing,
    dag_figure,
    drawn_point,
    label_box,
    labels_under_box,
    rings,
    selected_box,
)
from rollout_graph.ui.builders.palette import HIGHLIGHT_RING, SELECTED_RING
from tests.support.builders import Turn, agent_records, rollout_of, vllm_chat


@pytest.fixture(scope="module")
def big():
    return rollout_of(agent_records(600, session="rings", chain=40))


def chain_calls(rollout, figure) -> dict[int, tuple[int, ...]]:
    """Each drawn chain handle's key -> the calls it folds, from the chains analysis itself."""
    keys = set(figure.data[CHAINS].customdata)
    topo = rollout.topology
    chains = linear_chains(topo.parents, pinned_calls(rollout, set()), [c.n_prompt for c in rollout.calls])
    return {c.key: c.calls for c in chains if c.key in keys}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    collapse=st.booleans(),
    near_misses=st.booleans(),
    highlight=st.one_of(st.none(), st.integers(0, 599)),
    expand=st.integers(0, 5),
)
def test_targets_agree_with_the_figure(big, collapse, near_misses, highlight, expand):
    fig0 = dag_figure(big, collapse=collapse, near_misses=near_misses)
    keys = sorted(set(fig0.data[CHAINS].customdata)) if collapse else []
    expanded = keys[:expand]
    fig, targets = dag_drawing(big, highlight, collapse=collapse, near_misses=near_misses, expanded=expanded)
    drawn = list(fig.data[1].customdata)
    # every drawn call's point is where the calls trace draws it (drawn_point reads the trace)
    assert set(targets.nodes) == set(drawn)
    for i in drawn:
        assert targets.nodes[i] == drawn_point(fig, i)
    # every other call is folded in a drawn chain, whose handle is a point of the chains trace
    assert set(targets.chains).isdisjoint(drawn)
    assert set(targets.chains) | set(drawn) == set(range(len(big.calls)))
    handles = {
        (float(x), float(y)): int(k)
        for x, y, k in zip(*(fig.data[CHAINS][a] for a in ("x", "y", "customdata")), strict=True)
    }
    assert all(point in handles for point in targets.chains.values())
    if highlight is not None or expanded:  # the chains analysis below pins nothing (a return, not
        return  # assume(): the checks above hold for this input; filtering most inputs out failed a health check)
    folded = chain_calls(big, fig)
    for i, point in targets.chains.items():
        assert i in folded[handles[point]]


def test_rings_selected_in_view_hits_on_nodes_and_chain_handles(big):
    fig, targets = dag_drawing(big)
    before = fig.to_json()
    drawn = list(fig.data[1].customdata)
    chain_key = int(fig.data[CHAINS].customdata[0])
    folded = [i for i, p in targets.chains.items() if p == targets.chains[chain_key]]
    assert len(folded) > 1
    payload = rings(fig, targets, big, drawn[3], [drawn[5], *folded])
    json.dumps(payload)  # data for the browser: JSON as it stands
    assert fig.to_json() == before  # the figure sent is never changed
    shapes = payload["shapes"]
    ring = [s for s in shapes if s["name"] == RING_SELECTED]
    assert [(s["xanchor"], s["yanchor"]) for s in ring] == [targets.nodes[drawn[3]]]
    assert ring[0]["line"]["color"] == SELECTED_RING and ring[0]["x1"] == SELECTED_R
    hits = [(s["xanchor"], s["yanchor"]) for s in shapes if s["name"] == RING_HIT]
    # one ring on the hit drawn as a node, one on the chain's handle for all its folded calls
    assert sorted(hits) == sorted([targets.nodes[drawn[5]], targets.chains[chain_key]])
    assert {s["line"]["color"] for s in shapes if s["name"] == RING_HIT} == {HIGHLIGHT_RING}
    assert all(s["x1"] == HIT_R for s in shapes if s["name"] == RING_HIT)
    box = [s for s in shapes if s["name"] == RING_BOX]
    assert [s["label"]["text"] for s in box] == [f"<b>{big.calls[drawn[3]].node_id}</b>"]
    # every shape is anchored at a point and sized in pixels: the same at any zoom
    assert all(s["xsizemode"] == s["ysizemode"] == "pixel" for s in shapes)
    # no selection, no hits: nothing to draw
    assert rings(fig, targets, big, None, []) == {"shapes": []}


def test_the_covers_hide_exactly_the_labels_the_box_overlaps(big):
    fig, targets = dag_drawing(big, near_misses=True)
    labels = fig.data[3]
    xr, yr = fig.layout.xaxis.range, fig.layout.yaxis.range
    sx, sy = PLOT_WIDTH / (xr[1] - xr[0]), (fig.layout.height - 120) / (yr[1] - yr[0])

    def px(xv, yv):
        return (xv - xr[0]) * sx, (yr[1] - yv) * sy

    covered_any = 0
    for i in list(fig.data[1].customdata)[::7]:
        x, y = targets.nodes[i]
        node_id = big.calls[i].node_id
        covers = [
            (s["xanchor"], s["yanchor"]) for s in rings(fig, targets, big, i)["shapes"] if s["name"] == RING_COVER
        ]
        left_out = labels_under_box(fig, x, y, node_id)
        assert covers == [(float(labels.x[k]), float(labels.y[k])) for k in left_out]
        # every label the box (with its margin) overlaps is covered, and no other
        x0, y0, x1, y1 = selected_box(*px(x, y), node_id, box_goes_below(fig, y))
        for k, (lx, ly, text, side) in enumerate(
            zip(labels.x, labels.y, labels.text, labels.textposition, strict=True)
        ):
            a0, b0, a1, b1 = label_box(*px(lx, ly), text, side)
            hit = a0 < x1 + 8 and x0 - 8 < a1 and b0 < y1 + 2 and y0 - 2 < b1
            assert (k in left_out) == (hit or (lx, ly) == (x, y)), (i, text)
        covered_any += bool(left_out)
    assert covered_any


def test_a_hostile_call_id_reaches_the_browser_escaped():
    r = rollout_of(
        [vllm_chat(Turn("<img src=x onerror=alert(1)>", [1, 2], [3])), vllm_chat(Turn("n1", [1, 2, 3, 4], [5]))]
    )
    fig, targets = dag_drawing(r)
    payload = json.dumps(rings(fig, targets, r, 0, [0, 1]))
    assert "<img" not in payload and "&lt;img" in payload
    # and the same box drawn by Python for a call chosen outside the chart
    lit = dag_figure(r, highlight=0).to_json()
    assert "<img" not in lit


def test_a_search_with_thousands_of_hits_rings_the_ones_nearest_the_view(big):
    from rollout_graph.ui.builders.dag import MAX_HIT_RINGS

    fig, targets = dag_drawing(big, collapse=False)
    every = range(len(big.calls))
    hits = [(s["xanchor"], s["yanchor"]) for s in rings(fig, targets, big, None, every)["shapes"]]
    assert len(hits) == MAX_HIT_RINGS < len(big.calls)
    xr = fig.layout.xaxis.range
    centre = (xr[0] + xr[1]) / 2
    farthest = max(abs(x - centre) for x, _ in hits)
    left_out = set(targets.nodes.values()) - set(hits)
    assert all(abs(x - centre) >= farthest for x, _ in left_out)  # the nearest ones are ringed
