"""What the browser draws over an unchanged DAG figure (pure): the selected call's ring and boxed
id, and the rings of search hits or a findings group, as pixel-sized layout shapes.

Entry points: ``rings(figure, targets, rollout, selected, ringed) -> {"shapes": [...]}`` (the
payload the DAG client, views/panels/dag_client, puts in place of the figure's ``rg-ring-``
shapes); ``selection_shapes`` (also drawn into the figure for a call chosen outside the chart);
``labels_under_box`` (the labels the boxed id would cover, hidden under white covers).

Where it sits: after the figure (views/builders/dag/figure.py); called on every run by the DAG
panel (views/panels/graph.py), so a click or a key step moves two shapes and plotly never draws
the 5,000-call figure again. JSON data only: the one text, the call's id, is escaped for plotly.
"""

from __future__ import annotations

from collections.abc import Collection

import plotly.graph_objects as go

from rollout_graph.core.rollout import Rollout
from rollout_graph.ui.builders.dag.geometry import (
    BOX_MARGIN,
    LABEL_CHARS,
    PLOT_WIDTH,
    Box,
    box_below,
    label,
    label_box,
    selected_box,
)
from rollout_graph.ui.builders.dag.targets import Targets
from rollout_graph.ui.builders.palette import HIGHLIGHT_RING, SELECTED_RING

RING = "rg-ring-"  # the names of the shapes that ring calls start with this (the browser replaces them)
RING_SELECTED, RING_BOX, RING_STEM, RING_COVER, RING_HIT = (
    f"{RING}{part}" for part in ("selected", "box", "stem", "cover", "hit")
)
SELECTED_R = 11.5  # px: the selected call's ring (radius), over a 10-13 px marker
HIT_R = 10.5
MAX_HIT_RINGS = 300  # hit rings drawn at most: each is a shape plotly draws on every pan (docs/user-guide.md)


def _at(x: float, y: float, **shape) -> dict:
    """A shape anchored at data point (x, y), sized in px from it (y up): the same at any zoom."""
    return {"xref": "x", "yref": "y", "xsizemode": "pixel", "ysizemode": "pixel", "xanchor": x, "yanchor": y,
            "layer": "above", **shape}  # fmt: skip


def box_goes_below(fig: go.Figure, y: float) -> bool:
    """Whether the selected call's box goes under its point in this figure's view (no room above)."""
    yr, height = fig.layout.yaxis.range, fig.layout.height
    return yr is not None and height is not None and box_below(y, list(yr), height - 120)


def labels_under_box(fig: go.Figure, x: float, y: float, node_id: str) -> list[int]:
    """The points of the labels trace the selected call's box (at ``x``, ``y``) would cover in the
    default view: its own plain label and any neighbour's it collides with. Labels placed by
    the figure for a call chosen outside the chart already kept clear of its box."""
    labels = next((t for t in fig.data if t.name == "labels"), None)
    xr, yr, height = fig.layout.xaxis.range, fig.layout.yaxis.range, fig.layout.height
    if labels is None or labels.x is None or not len(labels.x) or xr is None or yr is None or height is None:
        return []
    sx, sy = PLOT_WIDTH / (xr[1] - xr[0]), (height - 120) / (yr[1] - yr[0])

    def px(xv: float, yv: float) -> tuple[float, float]:
        return (xv - xr[0]) * sx, (yr[1] - yv) * sy

    # a margin: the chart is often narrower than PLOT_WIDTH (the split pane at 1440 px is ~550 px)
    x0, y0, x1, y1 = selected_box(*px(x, y), node_id, box_goes_below(fig, y))
    box = (x0 - BOX_MARGIN, y0 - 2, x1 + BOX_MARGIN, y1 + 2)
    sides = labels.textposition
    keep = []
    for k, (lx, ly, text) in enumerate(zip(labels.x, labels.y, labels.text, strict=True)):
        side = sides[k] if isinstance(sides, (list, tuple)) else sides
        a0, b0, a1, b1 = label_box(*px(lx, ly), text, side)
        own = lx == x and ly == y
        keep.append(not own and not (a0 < box[2] and box[0] < a1 and b0 < box[3] and box[1] < b1))
    return [k for k, ok in enumerate(keep) if not ok]


def selection_shapes(
    x: float, y: float, node_id: str, covers: Collection[tuple[float, float, Box]] = (), below: bool = False
) -> list[dict]:
    """The selected call at (x, y) as layout shapes: a thick dark ring, its id boxed 20-40 px above
    it (below it with ``below``: a call in the view's top lane) on a stem (a white box whose label is the id, escaped for plotly), and a white cover over
    each label in ``covers`` ((x, y, box in px around that label's point, y down): the labels the box
    would overlap, its own plain label among them). Shapes, not an annotation and a trace: moving
    them is one cheap ``Plotly.relayout`` of the shapes (an annotation or a restyle makes plotly
    draw the whole chart again; docs/performance.md)."""
    w = 7.5 * len(node_id[:LABEL_CHARS]) + 10
    sign = -1 if below else 1
    out = [
        _at(lx, ly, type="rect", name=RING_COVER, x0=a0 - 1, x1=a1 + 1, y0=-b1 - 1, y1=-b0 + 1,
            line={"width": 0}, fillcolor="#ffffff")
        for lx, ly, (a0, b0, a1, b1) in covers
    ]  # fmt: skip
    out += [
        _at(x, y, type="line", name=RING_STEM, x0=0, x1=0, y0=sign * (SELECTED_R + 1), y1=sign * 20,
            line={"color": SELECTED_RING, "width": 1}),
        _at(x, y, type="rect", name=RING_BOX, x0=-w / 2, x1=w / 2, y0=sign * 20, y1=sign * 40, fillcolor="#ffffff",
            line={"color": SELECTED_RING, "width": 1},
            label={"text": f"<b>{label(node_id)}</b>", "font": {"size": 12, "color": SELECTED_RING},
                   "textposition": "middle center"}),
        _at(x, y, type="circle", name=RING_SELECTED, x0=-SELECTED_R, x1=SELECTED_R, y0=-SELECTED_R,
            y1=SELECTED_R, line={"color": SELECTED_RING, "width": 3}, fillcolor="rgba(0,0,0,0)"),
    ]  # fmt: skip
    return out


def hit_shapes(points: Collection[tuple[float, float]]) -> list[dict]:
    """A red ring (a search hit, a findings group) on each point."""
    return [
        _at(px, py, type="circle", name=RING_HIT, x0=-HIT_R, x1=HIT_R, y0=-HIT_R, y1=HIT_R,
            line={"color": HIGHLIGHT_RING, "width": 2.5}, fillcolor="rgba(0,0,0,0)")
        for px, py in points
    ]  # fmt: skip


def rings(
    fig: go.Figure, targets: Targets, rollout: Rollout, selected: int | None, ringed: Collection[int] = ()
) -> dict:
    """What the browser draws over an unchanged figure (views/panels/dag_client): ``shapes``, the
    rings of ``ringed`` (search hits, a findings group: on the call's own point, or on the handle
    of the collapsed chain it is folded into, one ring per chain), then the selected call's ring
    and boxed id (:func:`selection_shapes`, with covers over the labels its box would overlap).
    The browser puts them in place of the figure's own ``rg-ring-`` shapes."""
    points = _near_view(fig, sorted({p for i in ringed if (p := targets.point(i)) is not None}))
    shapes = hit_shapes(points)
    point = targets.nodes.get(selected) if selected is not None else None
    if selected is not None and point is not None:
        node_id = rollout.calls[selected].node_id
        below = box_goes_below(fig, point[1])
        shapes += selection_shapes(point[0], point[1], node_id, _covers(fig, point[0], point[1], node_id), below)
    return {"shapes": shapes}


def _near_view(fig: go.Figure, points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """All of ``points`` when there are few; else the ones nearest the figure's own view (its
    x range, one view's width either side first), at most ``MAX_HIT_RINGS``: thousands of ring
    shapes took plotly a second to draw at 5,000 calls."""
    if len(points) <= MAX_HIT_RINGS:
        return points
    xr = fig.layout.xaxis.range
    centre = (xr[0] + xr[1]) / 2 if xr is not None else 0.0
    return sorted(sorted(points, key=lambda p: (abs(p[0] - centre), p))[:MAX_HIT_RINGS])


def _covers(fig: go.Figure, x: float, y: float, node_id: str) -> list[tuple[float, float, Box]]:
    labels = next((t for t in fig.data if t.name == "labels"), None)
    covered = labels_under_box(fig, x, y, node_id)
    if labels is None or not covered:
        return []
    sides = labels.textposition
    out = []
    for k in covered:
        side = sides[k] if isinstance(sides, (list, tuple)) else sides
        out.append((float(labels.x[k]), float(labels.y[k]), label_box(0.0, 0.0, labels.text[k], side)))
    return out
