"""The DAG's geometry in pixels (pure): the default view's window and height, and the boxes a
label or the selected call's boxed id take on screen.

Entry points: ``default_view`` (height, x and y range of the figure's first view, whether the
overview under the chart is shown), ``label_box`` and ``selected_box`` (px boxes, y down),
``label`` and ``chain_label`` (the texts drawn). The constants are the chart's assumed size:
``PLOT_WIDTH`` is the DAG pane's width, used to place labels before the browser has drawn anything.

Where it sits: read by label placement (labels.py), the figure (figure.py) and the rings the
browser draws (rings.py), all in views/builders/dag/.
"""

from __future__ import annotations

import html
import math

import numpy as np

from rollout_graph.analysis.chains import Chain
from rollout_graph.escape import plot
from rollout_graph.ui.builders.dag.view import DagView

PLOT_WIDTH = 640  # px, a typical chart width: the DAG's pane of the split view at 1440 px
UNIT_PX = 30  # minimum px per step before the default view shows a window instead of everything
LANE_PX = 24  # px per lane
MAX_HEIGHT = 640  # the graph's pane is the window's height (views/panels/split.py)
MIN_HEIGHT = 240
CHAR_PX = 6.0  # width of one label character at font size 10
LABEL_CHARS = 14
BOX_MARGIN = 8  # px kept free beside the selected call's box when neighbours' labels are left out
SIDES = ("top center", "middle right", "bottom center")  # where a call's label may go, in order of preference

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in px, y down


def short(n: int) -> str:
    """A signed count that fits a label: +37, +12k, −1.2M."""
    sign = "+" if n >= 0 else "−"
    n = abs(n)
    return f"{sign}{n:,}" if n < 10_000 else f"{sign}{n / 1000:.0f}k" if n < 1_000_000 else f"{sign}{n / 1e6:.1f}M"


def chain_label(chain: Chain) -> str:
    """``37 calls<br>+12k tok``: how many calls a collapsed chain holds and how much its prompt grows."""
    n = len(chain.calls)
    return f"{n} call{'s' if n != 1 else ''}<br>{short(chain.token_growth)} tok"


def label(node_id: str) -> str:
    """A call's id as its label: at most ``LABEL_CHARS`` characters, escaped for plotly."""
    return plot(node_id if len(node_id) <= LABEL_CHARS else node_id[: LABEL_CHARS - 1] + "…")


def window(lo: float, hi: float, span: float, centre: float | None, top: bool = False) -> list[float]:
    """A range of width ``span`` inside [lo, hi] (all of it if it fits), around ``centre`` if given,
    else at the start (at the end with ``top``)."""
    if hi - lo <= span:  # it all fits: a small rollout fills the window, wherever the selection is
        return [lo, hi]
    if centre is None:
        start = hi - span if top else lo
    else:
        start = min(max(lo, centre - span / 2), hi - span)
    return [start, start + span]


def default_view(
    view: DagView, x: np.ndarray, y: np.ndarray, max_x: float, centre: int | None, fit_all: bool
) -> tuple[int, int, list[float], list[float], bool]:
    """(height, plot height, x range, y range, overview shown) of the figure's default view
    (``centre``: the drawn position of a call chosen outside the chart)."""
    # default view: everything if it is readable, else a window (the range slider shows the rest)
    steps_shown = max(6.0, PLOT_WIDTH / UNIT_PX)
    xr = window(-0.6, max_x + 0.6, steps_shown, None if centre is None else float(x[centre]))
    # tall enough for every lane the window draws, with its margins (rounded up): lanes used only
    # further along left an empty band under the first rows; a rollout that fits needs no overview
    lanes = view.n_lanes
    if not fit_all and len(x):
        inside = (x >= xr[0]) & (x <= xr[1])
        lanes = int(-y[inside].min()) + 1 if inside.any() else lanes
        if centre is not None:
            lanes = max(lanes, int(-y[centre]) + 1)
    height = int(min(MAX_HEIGHT, max(MIN_HEIGHT, math.ceil(LANE_PX * (lanes + 0.4)) + 120)))
    plot_h = height - 120
    lanes_shown = max(3.0, plot_h / LANE_PX)
    yr = window(-view.n_lanes + 0.4, 0.8, lanes_shown, None if centre is None else float(y[centre]), top=True)
    if fit_all:  # the overview: every drawn call in view (it replaces plotly's Autoscale), still clickable
        xr, yr = [-0.6, max_x + 0.6], [-view.n_lanes + 0.4, 0.8]
    # the range slider is the overview, shown when the default view does not hold everything
    overview = (xr[1] - xr[0]) < max_x + 1.2 or (yr[1] - yr[0]) < view.n_lanes + 0.4
    return height, plot_h, xr, yr, overview


def label_box(cxp: float, cyp: float, text: str, side: str) -> Box:
    """Where a label of the labels trace is drawn, around its point (px)."""
    lines = text.split("<br>")
    w = CHAR_PX * max(len(html.unescape(t)) for t in lines) + 4
    h = 13 * len(lines)
    return {
        "top center": (cxp - w / 2, cyp - 7 - h, cxp + w / 2, cyp - 7),
        "bottom center": (cxp - w / 2, cyp + 7, cxp + w / 2, cyp + 7 + h),
        "middle right": (cxp + 7, cyp - h / 2, cxp + 9 + w, cyp + h / 2),
    }[side]


def selected_box(cxp: float, cyp: float, node_id: str, below: bool = False) -> Box:
    """The selected call's boxed id, 30 px above its point (below it with ``below``), with its stem (px)."""
    w = 7.5 * len(node_id[:LABEL_CHARS]) + 10
    return (cxp - w / 2, cyp + 6, cxp + w / 2, cyp + 48) if below else (cxp - w / 2, cyp - 48, cxp + w / 2, cyp - 6)


BOX_ROOM = 50  # px the boxed id and its stem need above a point


def box_below(y: float, yr: list[float], plot_h: float) -> bool:
    """Whether the selected call's box goes under its point: a call in the view's top lane has no
    room for it above (the box was cut at the chart's top edge)."""
    return (yr[1] - y) * plot_h / (yr[1] - yr[0]) < BOX_ROOM
