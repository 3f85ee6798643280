"""The selected call's boxed id never overlaps a label: its own plain label and any neighbour's
label its box would cover are left out (views/builders/dag.py, mark_selected)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_graph.ingest.load.files import load_paths
from rollout_graph.pipeline import analyse
from rollout_graph.ui.builders.dag import PLOT_WIDTH, _label_box, _selected_box, dag_figure, drawn_point, mark_selected
from tests.support.builders import agent_records, rollout_of

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def label_boxes(fig):
    """(text, box in px) of every drawn label, in the figure's default view."""
    labels = next(t for t in fig.data if t.name == "labels")
    xr, yr = fig.layout.xaxis.range, fig.layout.yaxis.range
    sx, sy = PLOT_WIDTH / (xr[1] - xr[0]), (fig.layout.height - 120) / (yr[1] - yr[0])
    out = []
    for lx, ly, text, side in zip(labels.x, labels.y, labels.text, labels.textposition, strict=True):
        out.append((text, (lx, ly), _label_box((lx - xr[0]) * sx, (yr[1] - ly) * sy, text, side)))
    return out, (lambda x, y: ((x - xr[0]) * sx, (yr[1] - y) * sy))


def overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.fixture(scope="module")
def dense():
    return rollout_of(agent_records(1000, session="dense"))


@pytest.mark.parametrize("fit_all", [False, True])
def test_no_label_under_the_selected_box(dense, fit_all):
    before = dag_figure(dense, near_misses=True, fit_all=fit_all)
    candidates = list(next(t for t in before.data if t.name == "calls").customdata)
    collided = 0
    for index in candidates[:: max(1, len(candidates) // 40)]:
        fig = dag_figure(dense, near_misses=True, fit_all=fit_all)
        n_before = len(label_boxes(fig)[0])
        node_id = dense.calls[index].node_id
        mark_selected(fig, index, node_id)
        drawn, px = label_boxes(fig)
        x, y = drawn_point(fig, index)
        box = _selected_box(*px(x, y), node_id)
        assert not [text for text, _, b in drawn if overlaps(b, box)], index
        assert not [text for text, at, _ in drawn if at == (x, y)]  # its own plain label is gone: it is boxed
        collided += n_before - len(drawn)
    assert collided > 0  # some neighbours' labels were in the way (and were left out)


def test_a_click_keeps_every_label_clear_of_the_box():
    r = analyse(load_paths([SAMPLES / "vllm"]).sessions["fix-config-bug"])
    fig = dag_figure(r, near_misses=True)
    texts = [t for t, _, _ in label_boxes(fig)[0]]
    mark_selected(fig, 6, "c07")
    after = [t for t, _, _ in label_boxes(fig)[0]]
    assert "c07" in texts and "c07" not in after  # boxed instead
    assert set(texts) - set(after) == {"c07"}  # its neighbours stay labelled where there is room
