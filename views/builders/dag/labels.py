"""Label placement for the DAG's default view (pure): each call's id and each chain's size where
it overlaps no marker and no other label.

Entry point: ``place_labels(...) -> labels``: the labels drawn (x, y, text, side, colour), most
important first (the chosen call, roots, calls with findings, forks, leaves, inner calls). A call's
id is left out where it would collide; hover shows every id.

Where it sits: called by the figure (views/builders/dag/figure.py) with the default view's px
scale (views/builders/dag/geometry.py).
"""

from __future__ import annotations

import numpy as np

from rollout_graph.analysis.chains import Chain
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import Kind
from rollout_graph.ui.builders.dag.geometry import SIDES, Box, box_below, chain_label, label, label_box, selected_box
from rollout_graph.ui.builders.palette import FORK, INNER, LEAF, ROOT

Label = tuple[float, float, str, str, str]  # x, y, text, side, colour


class Boxes:
    """Axis-aligned boxes in px, on a grid, to place labels without overlap."""

    CELL = 48.0

    def __init__(self) -> None:
        self.grid: dict[tuple[int, int], list[Box]] = {}

    def _cells(self, box: Box):
        x0, y0, x1, y1 = box
        for gx in range(int(x0 // self.CELL), int(x1 // self.CELL) + 1):
            for gy in range(int(y0 // self.CELL), int(y1 // self.CELL) + 1):
                yield gx, gy

    def fits(self, box: Box) -> bool:
        x0, y0, x1, y1 = box
        for cell in self._cells(box):
            for a0, b0, a1, b1 in self.grid.get(cell, ()):
                if x0 < a1 and a0 < x1 and y0 < b1 and b0 < y1:
                    return False
        return True

    def add(self, box: Box) -> None:
        for cell in self._cells(box):
            self.grid.setdefault(cell, []).append(box)


RANK = {ROOT: 1, FORK: 2, LEAF: 4, INNER: 5}  # label order by kind; a call with findings ranks 3


def place_labels(
    rollout: Rollout,
    vis: list[int],
    kinds: list[Kind],
    x: np.ndarray,
    y: np.ndarray,
    drawn_chains: list[Chain],
    mx: np.ndarray,
    my: np.ndarray,
    highlight: int | None,
    centre: int | None,
    xr: list[float],
    yr: list[float],
    sx: float,
    sy: float,
) -> list[Label]:
    """The labels drawn for the default view, each where it overlaps no marker and no other label
    (x, y, text, side, colour)."""
    boxes = Boxes()

    def px(xv: float, yv: float) -> tuple[float, float]:
        return (xv - xr[0]) * sx, (yr[1] - yv) * sy

    for k in range(len(vis)):
        cxp, cyp = px(x[k], y[k])
        boxes.add((cxp - 5, cyp - 5, cxp + 5, cyp + 5))
    for k in range(len(drawn_chains)):
        cxp, cyp = px(mx[k], my[k])
        boxes.add((cxp - 5, cyp - 5, cxp + 5, cyp + 5))
    if centre is not None and highlight is not None:  # the boxed label of the chosen call, 30 px above (or below) it
        cxp, cyp = px(x[centre], y[centre])
        below = box_below(float(y[centre]), yr, (yr[1] - yr[0]) * sy)
        boxes.add(selected_box(cxp, cyp, rollout.calls[highlight].node_id, below))
    order = sorted(
        range(len(vis)),
        key=lambda k: (vis[k] != highlight, 3 if rollout.findings_for(vis[k]) else RANK[kinds[k]], vis[k]),
    )
    texts = [label(rollout.calls[v].node_id) for v in vis]

    def place(xv: float, yv: float, text: str, sides: tuple[str, ...] = SIDES) -> str | None:
        cxp, cyp = px(xv, yv)
        for side in sides:
            box = label_box(cxp, cyp, text, side)
            if boxes.fits(box):
                boxes.add(box)
                return side
        return None

    # labels are one text-only trace (validated as arrays: fast)
    labels: list[Label] = []
    for k in order:
        if vis[k] == highlight:
            continue  # labelled by its own box
        side = place(x[k], y[k], texts[k])
        if side is not None:
            labels.append((x[k], y[k], texts[k], side, "#475569"))
    for k, chain in enumerate(drawn_chains):
        text = chain_label(chain)
        side = place(mx[k], my[k], text, ("bottom center", "top center"))
        if side is not None:
            labels.append((mx[k], my[k], text, side, "#64748b"))
    return labels
