"""The selected call's boxed id never overlaps a label: its own plain label and any neighbour's
label its box would cover are hidden under the covers the browser draws with the ring
(views/builders/dag/rings.py ``rings``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.ui.builders.dag import (
    PLOT_WIDTH,
    RING_COVER,
    box_goes_below,
    dag_drawing,
    label_box,
    rings,
    selected_box,
)
from tests.support.builders import agent_records, rollout_of

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def label_boxes(fig):
    """(text, box in px) of every drawn label, in the figure's default view."""
    labels = next(t for t in fig.data if t.name == "labels")
    xr, yr = fig.layout.xaxis.range, fig.layout.yaxis.range
    sx, sy = PLOT_WIDTH / (xr[1] - xr[0]), (fig.layout.height - 120) / (yr[1] - yr[0])
    out = []
    for lx, ly, text, side in zip(labels.x, labels.y, labels.text, labels.textposition, strict=True):
        out.append((text, (lx, ly), label_box((lx - xr[0]) * sx, (yr[1] - ly) * sy, text, side)))
    return out, (lambda x, y: ((x - xr[0]) * sx, (yr[1] - y) * sy))


def overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.fixture(scope="module")
def dense():
    return rollout_of(agent_records(1000, session="dense"))


def covered(fig, targets, rollout, index) -> set[tuple[float, float]]:
    """The label points the browser covers when ``index`` is selected."""
    shapes = rings(fig, targets, rollout, index)["shapes"]
    return {(s["xanchor"], s["yanchor"]) for s in shapes if s["name"] == RING_COVER}


@pytest.mark.parametrize("fit_all", [False, True])
def test_no_label_under_the_selected_box(dense, fit_all):
    fig, targets = dag_drawing(dense, near_misses=True, fit_all=fit_all)
    drawn, px = label_boxes(fig)
    candidates = list(next(t for t in fig.data if t.name == "calls").customdata)
    collided = 0
    for index in candidates[:: max(1, len(candidates) // 40)]:
        node_id = dense.calls[index].node_id
        hidden = covered(fig, targets, dense, index)
        x, y = targets.nodes[index]
        box = selected_box(*px(x, y), node_id, box_goes_below(fig, y))
        shown = [(text, at, b) for text, at, b in drawn if at not in hidden]
        assert not [text for text, _, b in shown if overlaps(b, box)], index
        assert not [text for text, at, _ in shown if at == (x, y)]  # its own plain label is covered: it is boxed
        collided += len(hidden - {(x, y)})
    assert collided > 0  # some neighbours' labels were in the way (and were covered)


def test_a_click_keeps_every_label_clear_of_the_box():
    r = analyse(load_paths([SAMPLES / "vllm"]).sessions["fix-config-bug"])
    fig, targets = dag_drawing(r, near_misses=True)
    drawn = label_boxes(fig)[0]
    hidden = covered(fig, targets, r, 6)
    texts = [t for t, _, _ in drawn]
    after = [t for t, at, _ in drawn if at not in hidden]
    assert "c07" in texts and "c07" not in after  # boxed instead
    assert set(texts) - set(after) == {"c07"}  # its neighbours stay labelled where there is room
