"""The rollout DAG as a plotly figure (pure), and its legend as HTML (pure).

``dag_figure(rollout, highlight=None, *, near_misses=False, collapse=True, expanded=(),
focus=None, keep=())`` draws:

- trace 0 ``overview``: an outline of the drawn calls (the top and bottom lane in use at each
  depth), the picture in the overview under the chart (plotly's range slider); empty when the
  whole rollout fits the default view (no overview);
- trace 1 ``calls``: one marker per drawn call, ``customdata`` = the call's arrival index (with
  chains collapsed, point ``k`` is not call ``k``: read ``customdata``);
- trace 2 ``chains``: a clickable handle in the middle of each thick edge, ``customdata`` = the
  chain's key (see graph/analysis/chains.py);
- trace 3 ``labels``: call ids and each chain's call count and token growth, placed without overlap;
- layout shapes ``edges`` (exact token-prefix links between drawn calls, thin and solid),
  ``chain lines`` (each collapsed linear chain as one thick edge) and ``near misses`` (dashed amber
  links to the call a root nearly continued: history rewritten, compacted; only with
  ``near_misses=True``, and such roots are then laid out as continuations of that call instead of
  as separate trees). Each is one SVG path for the whole rollout; ``line_segments`` reads them.

Markers and labels sit on ``xaxis2``, overlaid on ``xaxis`` and matching it (same range, pan and
zoom), so the range slider of ``xaxis`` draws only the outline (``SKELETON``). Only the markers
and labels inside the current view are drawn (``marker.maxdisplayed``, see ``_cull``); plotly
draws the others when a pan or zoom brings them into view.

Keyword arguments (all optional, neutral defaults, so callers keep working as options are added;
new options should follow the same rule and take call indices as sets):

- ``highlight``: a call chosen outside the chart (deep link, finding, picker, tour): selected,
  ringed with its id boxed (``selection_shapes``), and the view is centred on it;
- ``collapse``: draw linear chains as segments (``rollout_graph.analysis.chains``);
- ``expanded``: keys of chains to draw call by call;
- ``focus``: a call whose subtree (exact descendants and near-miss continuations) is the only part drawn;
- ``keep``: more calls to keep as nodes (never hidden in a chain), e.g. search hits;
- ``dimmed``: calls veiled in white (filtered out by the filters panel);
- ``highlighted``: calls ringed in red (search hits, a findings group); they are kept as nodes.
  Both are overlay traces added after the labels, so the numbered traces above keep their numbers;
- ``fit_all``: the whole drawn rollout in view (the "Fit all" overview that replaces plotly's
  Autoscale); its calls stay the clickable markers they are in the default view;
- ``shares``: colour calls by the share of their compared tokens a correction clips or masks
  (``mismatch.call_shares``, 0 pale .. 1 dark red; calls without compared tokens neutral grey)
  instead of by role, and name it in the hover (``shares_label``: the correction's label).

``dag_drawing`` returns the figure and its ``Targets`` (each call's point, or its collapsed
chain's handle); ``rings(figure, targets, rollout, selected, ringed)`` builds what the browser
draws over the unchanged figure (views/panels/dag_client): the selected call's ring and boxed id
and the search hits' rings, as pixel-sized layout shapes named ``rg-ring-...``. A call chosen
outside the chart (``highlight``) is boxed with the same shapes in the figure itself.
``mark_selected(figure, index, node_id)`` draws a selection into a figure instead (a trace
``selected`` and an annotation), without moving the view; the app does not use it.

The figure depends only on these arguments, never on clicks made in the chart itself, so it
stays identical across reruns and plotly keeps its own selection, zoom and pan. Labels are placed
without overlap for the default view (a call's id is left out where it would collide; hover shows
every id; the selected call is always labelled).
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from rollout_graph.analysis.chains import Chain, compacted_calls, continuations, linear_chains, pinned_calls
from rollout_graph.analysis.chains import collapse as collapse_chains
from rollout_graph.analysis.near_miss import COMPACTION, RETRY
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import Kind
from rollout_graph.escape import html_text, plot
from rollout_graph.ui.builders.layout import pack
from rollout_graph.ui.builders.mismatch import NO_SHARE, share_colours, share_gradient
from rollout_graph.ui.builders.palette import (
    AGENT,
    FORK,
    HIGHLIGHT_RING,
    INNER,
    KIND_GLYPHS,
    KIND_LABELS,
    LEAF,
    NEAR_MISS_DRAWN,
    NEWEST_RING,
    ROLE_COLORS,
    ROLE_GLYPHS,
    ROLE_LABELS,
    ROLE_LINES,
    ROOT,
    SELECTED_RING,
    role_symbol,
)

ROLE_ORDER = list(ROLE_COLORS)
SYMBOL_CODES = {ROOT: 2, FORK: 1, LEAF: 0, INNER: 100}  # plotly symbol numbers: diamond, square, circle, circle-open
HOVER_FINDINGS = 3
OVERVIEW, CALLS, CHAINS, LABELS = range(4)  # trace numbers (curve_number in a selection)
CHAIN_LENGTH = 3.0  # a collapsed chain is drawn this many steps long
# Geometry of the default view, used to place labels without overlap and to choose the window.
PLOT_WIDTH = 640  # px, a typical chart width: the DAG's pane of the split view at 1440 px
UNIT_PX = 30  # minimum px per step before the default view shows a window instead of everything
LANE_PX = 24  # px per lane
MAX_HEIGHT = 480
MIN_HEIGHT = 240
CHAR_PX = 6.0  # width of one label character at font size 10
LABEL_CHARS = 14
FILLED = {100: 0, 300: 200, 128: 28}  # open symbols (inner calls) -> filled, when calls are coloured by share
SHARE_OUTLINE = "#475569"
BOX_MARGIN = 8  # px kept free beside the selected call's box when neighbours' labels are left out
SIDES = ("top center", "middle right", "bottom center")  # where a call's label may go, in order of preference


def node_kind(rollout: Rollout, i: int) -> Kind:
    """Where call ``i`` sits in the graph (decided in graph/, drawn here)."""
    return rollout.topology.kind(i)


def _hover(rollout: Rollout, i: int, role: str, kind: str) -> str:
    call = rollout.calls[i]
    lines = [
        f"<b>{plot(call.node_id)}</b> · {role} · {kind}",
        f"arrival #{i} · prompt {call.n_prompt:,} · sampled {call.n_sampled:,} tokens",
        f"finish: {plot(str(call.finish_reason))}",
    ]
    if call.logprobs_aligned and call.n_sampled and call.sampled_logprobs is not None:
        lines.append(f"mean logprob {float(np.nanmean(call.sampled_logprobs)):.3f}")
    kept = rollout.topology.discarded.get(i)
    if kept is not None:
        lines.append(f"discarded: {plot(rollout.calls[kept].node_id)} continued")
    findings = rollout.findings_for(i)
    for f in findings[:HOVER_FINDINGS]:
        lines.append(f"{f.level} {plot(f.code)}")
    if len(findings) > HOVER_FINDINGS:
        lines.append(f"… {len(findings) - HOVER_FINDINGS} more findings")
    return "<br>".join(lines)


def _short(n: int) -> str:
    sign = "+" if n >= 0 else "−"
    n = abs(n)
    return f"{sign}{n:,}" if n < 10_000 else f"{sign}{n / 1000:.0f}k" if n < 1_000_000 else f"{sign}{n / 1e6:.1f}M"


def chain_label(chain: Chain) -> str:
    """``37 calls<br>+12k tok``: how many calls a collapsed chain holds and how much its prompt grows."""
    n = len(chain.calls)
    return f"{n} call{'s' if n != 1 else ''}<br>{_short(chain.token_growth)} tok"


def _label(node_id: str) -> str:
    return plot(node_id if len(node_id) <= LABEL_CHARS else node_id[: LABEL_CHARS - 1] + "…")


@dataclass(frozen=True, slots=True)
class DagView:
    """What the figure draws: drawn calls with positions, drawn parents, collapsed chains."""

    visible: list[int]
    drawn_parent: dict[int, int | None]
    via: dict[int, Chain]
    chains: list[Chain]
    continued: dict[int, int]  # root -> the call it nearly continued (laid out after it)
    x: dict[int, float]
    y: dict[int, int]
    n_lanes: int


def laid_out_after(rollout: Rollout) -> dict[int, int]:
    """Roots drawn as a continuation of an earlier call (root -> that call): a broken replay after
    the call whose reply it replays, a compaction after the call whose history it summarised
    (``chains.compacted_calls``, not the first call it shares its head with)."""
    return {**continuations(rollout), **compacted_calls(rollout)}


def retries_of_compactions(rollout: Rollout, compacted: Mapping[int, int]) -> dict[int, int]:
    """Discarded roots re-sent as a compaction (a retry of it) -> the call that compaction
    summarised: drawn beside the compaction, after that call."""
    return {
        m.earlier: compacted[m.later]
        for m in rollout.replaced_by.values()
        if m.kind == RETRY and m.later in compacted and rollout.topology.parents[m.earlier] is None
    }


def subtree(rollout: Rollout, node: int, near_misses: bool = True) -> set[int]:
    """``node`` and everything below it: exact descendants, and near-miss continuations."""
    import networkx as nx

    graph = rollout.to_networkx()
    if near_misses:
        ids = rollout.node_ids
        graph.add_edges_from((ids[e], ids[r]) for r, e in laid_out_after(rollout).items())
    names = nx.descendants(graph, rollout.calls[node].node_id) | {rollout.calls[node].node_id}
    return {rollout.index_of(name) for name in names}


def dag_view(
    rollout: Rollout,
    *,
    near_misses: bool = False,
    collapse: bool = True,
    expanded: Collection[int] = (),
    focus: int | None = None,
    keep: Collection[int] = (),
) -> DagView:
    """Which calls are drawn and where (pure; see the module docstring for the arguments)."""
    topo, n = rollout.topology, len(rollout.calls)
    keep = set(keep) | ({focus} if focus is not None else set())
    compacted = compacted_calls(rollout)  # compaction -> the call it summarised: drawn after it, always
    continued = laid_out_after(rollout) if near_misses else {}  # both ends are pinned (chains.pinned_calls)
    if collapse:
        chains = linear_chains(topo.parents, pinned_calls(rollout, keep), [c.n_prompt for c in rollout.calls])
        # a "chain" of one call is drawn as that call: a bar labelled "1 call" hides it for nothing
        chains = [c for c in chains if len(c.calls) > 1]
        view = collapse_chains(n, topo.parents, chains, expanded)
        visible, drawn, via, folded = view.visible, view.drawn_parent, view.via, view.chains
    else:
        visible, drawn, via, folded = list(range(n)), dict(enumerate(topo.parents)), {}, []
    if focus is not None:
        inside = subtree(rollout, focus, near_misses)
        visible = [v for v in visible if v in inside]
        folded = [c for c in folded if c.before in inside and c.after in inside]
        via = {v: c for v, c in via.items() if v in inside and c.before in inside}
        continued = {r: e for r, e in continued.items() if r in inside and e in inside}
    after = {**compacted, **retries_of_compactions(rollout, compacted)}
    layout_parent = _acyclic({v: (continued.get(v) if drawn[v] is None else drawn[v]) for v in visible})
    if focus is not None:
        layout_parent[focus] = None
    length = {v: CHAIN_LENGTH for v in via}
    placed = pack(visible, layout_parent, length, after, aside=topo.discarded)
    return DagView(visible, drawn, via, folded, continued, placed.x, placed.y, placed.n_lanes)


def _acyclic(parent: dict[int, int | None]) -> dict[int, int | None]:
    """``parent`` with every cycle cut (the edge that closes it is dropped). Exact parents never
    form one, but near-miss links drawn as edges join trees whose calls arrived out of order."""
    out = dict(parent)
    done: set[int] = set()
    for start in parent:
        path: list[int] = []
        on_path: set[int] = set()
        v: int | None = start
        while v is not None and v in out and v not in done and v not in on_path:
            path.append(v)
            on_path.add(v)
            v = out[v]
        if v is not None and v in on_path:
            out[path[-1]] = None
        done.update(path)
    return out


# The overview under the chart (plotly's range slider) draws every trace of its axis again. Only the
# rollout's outline is on that axis; markers and labels are on an overlaid axis that matches it, so
# they are drawn once. Lines (edges, chain lines, near-miss links) are layout shapes, one SVG path
# each for the whole rollout, instead of a trace whose every segment is its own path
# (docs/performance.md).
SKELETON = ("overview",)
MARKS_AXIS = "x2"
OUTLINE_FILL = "rgba(148,163,184,0.11)"
EDGE_LINE = {"color": "#cbd5e1", "width": 1.2}
CHAIN_LINE = {"color": "#94a3b8", "width": 6}
NEAR_MISS_LINE = {"color": "#d97706", "width": 1.8, "dash": "dash"}


def _lines(name: str, xs: np.ndarray, ys: np.ndarray, line: dict, opacity: float = 1.0) -> dict | None:
    """Segments (one row of ``xs``/``ys`` each: start, end) as one path shape in data coordinates,
    between the grid and the traces; None when there are none."""
    if len(xs) == 0:
        return None
    moves = (
        f"M{a:.4g},{b:.4g}L{c:.4g},{d:.4g}" for (a, c), (b, d) in zip(np.round(xs, 3), np.round(ys, 3), strict=True)
    )
    return {
        "type": "path", "path": "".join(moves), "xref": "x", "yref": "y", "layer": "between", "line": line,
        "opacity": opacity, "fillcolor": "rgba(0,0,0,0)", "name": name,
    }  # fmt: skip


def line_segments(figure: go.Figure, name: str) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """The segments of the figure's line shape ``name`` ("edges", "chain lines", "near misses"):
    ((x0, y0), (x1, y1)) each; none when the figure draws no such line."""
    shape = next((sh for sh in figure.layout.shapes if sh.name == name), None)
    if shape is None:
        return []
    out = []
    for move in shape.path.split("M")[1:]:
        start, end = move.split("L")
        a, b = (float(v) for v in start.split(","))
        c, d = (float(v) for v in end.split(","))
        out.append(((a, b), (c, d)))
    return out


def _outline(x: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float]]:
    """The overview's picture: a polygon around the drawn calls, from the top lane to the bottom
    lane in use at each depth (one SVG path, whatever the rollout's size)."""
    if len(x) == 0:
        return [], []
    cols = np.round(x * 2) / 2
    order = np.argsort(cols, kind="stable")
    cols, ys = cols[order], y[order]
    starts = np.flatnonzero(np.r_[True, cols[1:] != cols[:-1]])
    top, bottom = np.maximum.reduceat(ys, starts) + 0.35, np.minimum.reduceat(ys, starts) - 0.35
    at = cols[starts]
    # a flat step around each depth; neighbouring depths are joined by a slant
    sx = np.column_stack([at - 0.24, at + 0.24]).ravel()
    top, bottom = np.repeat(top, 2), np.repeat(bottom, 2)
    return np.r_[sx, sx[::-1], sx[:1]].tolist(), np.r_[top, bottom[::-1], top[:1]].tolist()


class _Boxes:
    """Axis-aligned boxes in px, on a grid, to place labels without overlap."""

    CELL = 48.0

    def __init__(self) -> None:
        self.grid: dict[tuple[int, int], list[tuple[float, float, float, float]]] = {}

    def _cells(self, box: tuple[float, float, float, float]):
        x0, y0, x1, y1 = box
        for gx in range(int(x0 // self.CELL), int(x1 // self.CELL) + 1):
            for gy in range(int(y0 // self.CELL), int(y1 // self.CELL) + 1):
                yield gx, gy

    def fits(self, box: tuple[float, float, float, float]) -> bool:
        x0, y0, x1, y1 = box
        for cell in self._cells(box):
            for a0, b0, a1, b1 in self.grid.get(cell, ()):
                if x0 < a1 and a0 < x1 and y0 < b1 and b0 < y1:
                    return False
        return True

    def add(self, box: tuple[float, float, float, float]) -> None:
        for cell in self._cells(box):
            self.grid.setdefault(cell, []).append(box)


def _window(lo: float, hi: float, span: float, centre: float | None, top: bool = False) -> list[float]:
    """A range of width ``span`` inside [lo, hi] (all of it if it fits), around ``centre`` if given,
    else at the start (at the end with ``top``)."""
    if hi - lo <= span:  # it all fits: a small rollout fills the window, wherever the selection is
        return [lo, hi]
    if centre is None:
        start = hi - span if top else lo
    else:
        start = min(max(lo, centre - span / 2), hi - span)
    return [start, start + span]


def _default_view(
    view: DagView, x: np.ndarray, y: np.ndarray, max_x: float, centre: int | None, fit_all: bool
) -> tuple[int, int, list[float], list[float], bool]:
    """(height, plot height, x range, y range, overview shown) of the figure's default view
    (``centre``: the drawn position of a call chosen outside the chart)."""
    # default view: everything if it is readable, else a window (the range slider shows the rest)
    steps_shown = max(6.0, PLOT_WIDTH / UNIT_PX)
    xr = _window(-0.6, max_x + 0.6, steps_shown, None if centre is None else float(x[centre]))
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
    yr = _window(-view.n_lanes + 0.4, 0.8, lanes_shown, None if centre is None else float(y[centre]), top=True)
    if fit_all:  # the overview: every drawn call in view (it replaces plotly's Autoscale), still clickable
        xr, yr = [-0.6, max_x + 0.6], [-view.n_lanes + 0.4, 0.8]
    # the range slider is the overview, shown when the default view does not hold everything
    overview = (xr[1] - xr[0]) < max_x + 1.2 or (yr[1] - yr[0]) < view.n_lanes + 0.4

    return height, plot_h, xr, yr, overview


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in px, y down


def _label_box(cxp: float, cyp: float, text: str, side: str) -> Box:
    """Where a label of the labels trace is drawn, around its point (px)."""
    lines = text.split("<br>")
    w = CHAR_PX * max(len(html.unescape(t)) for t in lines) + 4
    h = 13 * len(lines)
    return {
        "top center": (cxp - w / 2, cyp - 7 - h, cxp + w / 2, cyp - 7),
        "bottom center": (cxp - w / 2, cyp + 7, cxp + w / 2, cyp + 7 + h),
        "middle right": (cxp + 7, cyp - h / 2, cxp + 9 + w, cyp + h / 2),
    }[side]


def _selected_box(cxp: float, cyp: float, node_id: str) -> Box:
    """The selected call's boxed id, 30 px above its point, with its stem (px)."""
    w = 7.5 * len(node_id[:LABEL_CHARS]) + 10
    return (cxp - w / 2, cyp - 48, cxp + w / 2, cyp - 6)


def _place_labels(
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
) -> tuple[list[tuple[float, float, str, str, str]], list[str]]:
    """The labels drawn for the default view, each where it overlaps no marker and no other label
    (x, y, text, side, colour), and the calls trace's text (ids not labelled otherwise)."""
    # labels, most important first, each only where it does not overlap a marker or a label
    boxes = _Boxes()

    def px(xv: float, yv: float) -> tuple[float, float]:
        return (xv - xr[0]) * sx, (yr[1] - yv) * sy

    for k in range(len(vis)):
        cxp, cyp = px(x[k], y[k])
        boxes.add((cxp - 5, cyp - 5, cxp + 5, cyp + 5))
    for k in range(len(drawn_chains)):
        cxp, cyp = px(mx[k], my[k])
        boxes.add((cxp - 5, cyp - 5, cxp + 5, cyp + 5))
    if centre is not None and highlight is not None:  # the boxed label of the chosen call, 30 px above it, and its stem
        cxp, cyp = px(x[centre], y[centre])
        boxes.add(_selected_box(cxp, cyp, rollout.calls[highlight].node_id))
    rank = {ROOT: 1, FORK: 2, LEAF: 4, INNER: 5}
    order = sorted(
        range(len(vis)),
        key=lambda k: (vis[k] != highlight, 3 if rollout.findings_for(vis[k]) else rank[kinds[k]], vis[k]),
    )
    texts = [_label(rollout.calls[v].node_id) for v in vis]

    def place(xv: float, yv: float, text: str, sides: tuple[str, ...] = SIDES) -> str | None:
        cxp, cyp = px(xv, yv)
        for side in sides:
            box = _label_box(cxp, cyp, text, side)
            if boxes.fits(box):
                boxes.add(box)
                return side
        return None

    # labels are one text-only trace (validated as arrays: fast); the calls trace carries every
    # other id in text that plotly shows only for the call selected by a click
    labels: list[tuple[float, float, str, str, str]] = []
    hidden_ids = list(texts)  # shown by plotly for a selected call; empty where a label is drawn already
    for k in order:
        if vis[k] == highlight:
            hidden_ids[k] = ""  # labelled by its own boxed annotation
            continue
        side = place(x[k], y[k], texts[k])
        if side is not None:
            labels.append((x[k], y[k], texts[k], side, "#475569"))
            hidden_ids[k] = ""
    for k, chain in enumerate(drawn_chains):
        text = chain_label(chain)
        side = place(mx[k], my[k], text, ("bottom center", "top center"))
        if side is not None:
            labels.append((mx[k], my[k], text, side, "#64748b"))

    return labels, hidden_ids


@dataclass(frozen=True, slots=True)
class Targets:
    """Where a ring for a call goes in a figure: ``nodes``, each drawn call's point; ``chains``,
    each call folded into a drawn collapsed chain -> that chain's handle (its middle)."""

    nodes: dict[int, tuple[float, float]]
    chains: dict[int, tuple[float, float]]

    def point(self, index: int) -> tuple[float, float] | None:
        """The call's own point, else its chain's handle, else None (not drawn: outside a focus)."""
        return self.nodes.get(index) or self.chains.get(index)


def dag_figure(
    rollout: Rollout,
    highlight: int | None = None,
    *,
    near_misses: bool = False,
    collapse: bool = True,
    expanded: Collection[int] = (),
    focus: int | None = None,
    keep: Collection[int] = (),
    dimmed: Collection[int] = (),
    highlighted: Collection[int] = (),
    fit_all: bool = False,
    shares: Mapping[int, float] | None = None,
    shares_label: str = "",
) -> go.Figure:
    """The DAG figure (see the module docstring for the traces and the keyword arguments)."""
    return dag_drawing(
        rollout, highlight, near_misses=near_misses, collapse=collapse, expanded=expanded, focus=focus, keep=keep,
        dimmed=dimmed, highlighted=highlighted, fit_all=fit_all, shares=shares, shares_label=shares_label,
    )[0]  # fmt: skip


def dag_drawing(
    rollout: Rollout,
    highlight: int | None = None,
    *,
    near_misses: bool = False,
    collapse: bool = True,
    expanded: Collection[int] = (),
    focus: int | None = None,
    keep: Collection[int] = (),
    dimmed: Collection[int] = (),
    highlighted: Collection[int] = (),
    fit_all: bool = False,
    shares: Mapping[int, float] | None = None,
    shares_label: str = "",
) -> tuple[go.Figure, Targets]:
    """The DAG figure and where each call's ring goes in it (:class:`Targets`, for the rings the
    browser draws: :func:`rings`)."""
    keep = set(keep) | set(highlighted) | ({highlight} if highlight is not None else set())
    view = dag_view(rollout, near_misses=near_misses, collapse=collapse, expanded=expanded, focus=focus, keep=keep)
    vis = view.visible
    roles = rollout.node_roles
    kinds = [node_kind(rollout, i) for i in vis]
    x = np.array([view.x[v] for v in vis], dtype=float)
    y = -np.array([view.y[v] for v in vis], dtype=float)
    pos = {v: k for k, v in enumerate(vis)}
    max_x = float(x.max()) if len(x) else 0.0

    centre = pos.get(highlight) if highlight is not None else None
    height, plot_h, xr, yr, overview = _default_view(view, x, y, max_x, centre, fit_all)
    sx, sy = PLOT_WIDTH / (xr[1] - xr[0]), plot_h / (yr[1] - yr[0])

    # edges: exact links between drawn calls (a chain's edge is drawn thick, a continuation dashed)
    direct = [v for v in vis if view.drawn_parent[v] is not None and v not in view.via and view.drawn_parent[v] in pos]
    par = np.array([pos[p] for v in direct if (p := view.drawn_parent[v]) is not None], dtype=int)
    kid = np.array([pos[v] for v in direct], dtype=int)

    # collapsed chains: a thick edge trimmed off the end markers, a handle in its middle
    drawn_chains = [c for c in view.chains if c.before in pos and c.after in pos]
    cx0 = np.array([x[pos[c.before]] for c in drawn_chains])
    cx1 = np.array([x[pos[c.after]] for c in drawn_chains])
    cy0 = np.array([y[pos[c.before]] for c in drawn_chains])
    cy1 = np.array([y[pos[c.after]] for c in drawn_chains])
    trim = 0.22
    lx0, lx1 = cx0 + trim, cx1 - trim
    ly0, ly1 = cy0 + (cy1 - cy0) * trim / CHAIN_LENGTH, cy1
    mx, my = (cx0 + cx1) / 2, (cy0 + cy1) / 2

    labels, hidden_ids = _place_labels(
        rollout, vis, kinds, x, y, drawn_chains, mx, my, highlight, centre, xr, yr, sx, sy
    )

    role_codes = np.array([ROLE_ORDER.index(roles[v]) for v in vis], dtype=float)
    fill: dict = {
        "color": role_codes,
        "colorscale": [[i / (len(ROLE_ORDER) - 1), ROLE_COLORS[r]] for i, r in enumerate(ROLE_ORDER)],
        "cmin": 0,
        "cmax": len(ROLE_ORDER) - 1,
    }
    hovers = [_hover(rollout, v, roles[v], node_kind(rollout, v)) for v in vis]
    symbols = np.array([role_symbol(SYMBOL_CODES[k], roles[v]) for k, v in zip(kinds, vis, strict=True)])
    sizes = np.array([13 if k in (ROOT, FORK) else 10 for k in kinds])
    outlines = [ROLE_LINES[roles[v]] for v in vis]
    if shares is not None:
        colours = share_colours(dict(shares))
        fill = {"color": [colours.get(v, NO_SHARE) for v in vis]}
        # an open symbol has no fill to colour: inner calls are drawn filled and smaller; a dark
        # outline keeps a pale fill visible on white
        symbols = np.array([FILLED.get(int(c), int(c)) for c in symbols])
        sizes = np.where(np.array([k == INNER for k in kinds], dtype=bool), 8, sizes)
        outlines = [SHARE_OUTLINE if o == ROLE_LINES[AGENT] else o for o in outlines]
        what = plot(shares_label or "the correction")
        hovers = [
            h + f"<br>{what}: {shares[v]:.1%} of compared tokens clipped or masked"
            if v in shares
            else h + f"<br>{what}: no compared trainable tokens"
            for h, v in zip(hovers, vis, strict=True)
        ]
    traces: list[go.Scatter] = []
    ox, oy = _outline(x, y) if overview else ([], [])  # only needed when the range slider is shown
    traces.append(
        go.Scatter(
            _validate=False,
            x=ox, y=oy, mode="lines", fill="toself", fillcolor=OUTLINE_FILL, line={"width": 0}, hoverinfo="skip",
            showlegend=False, name="overview",
        )
    )  # fmt: skip
    traces.append(
        go.Scatter(
            _validate=False,
            x=x,
            y=y,
            mode="markers+text",
            text=hidden_ids,
            textposition="top center",
            textfont={"size": 12, "color": "rgba(0,0,0,0)"},  # never shown: the selection ring labels the call
            name="calls",
            customdata=np.array(vis, dtype=np.int32),
            marker={
                **fill,
                "symbol": symbols,
                "size": sizes,
                "line": {"color": outlines, "width": 1},
            },
            hovertext=hovers,
            hoverinfo="text",
            # An (empty) selection from the start: every call is "unselected" (full opacity) and
            # stays so; the selected call is ringed and boxed by its own marker (mark_selected), not
            # by plotly's selected style, which drew it paler. No `selected` style: with one,
            # Streamlit receives no click selection from an SVG scatter.
            selectedpoints=[],
            unselected={"marker": {"opacity": 1.0}, "textfont": {"color": "rgba(0,0,0,0)"}},
            cliponaxis=False,
            showlegend=False,
        )
    )
    # a compaction's link starts at the call it summarised (where it is drawn after), not at the
    # first call it shares its head with
    links = [
        (view.continued.get(m.later, m.earlier) if m.kind == COMPACTION else m.earlier, m.later)
        for m in rollout.near_misses.values()
        if near_misses and m.kind in NEAR_MISS_DRAWN and m.earlier in pos and m.later in pos
    ]
    links = [(e, r) for e, r in links if e in pos]
    nx = np.array([[x[pos[e]], x[pos[r]]] for e, r in links]).reshape(-1, 2)
    ny = np.array([[y[pos[e]], y[pos[r]]] for e, r in links]).reshape(-1, 2)
    shapes = [
        _lines("edges", np.column_stack([x[par], x[kid]]), np.column_stack([y[par], y[kid]]), EDGE_LINE),
        _lines("chain lines", np.column_stack([lx0, lx1]), np.column_stack([ly0, ly1]), CHAIN_LINE, opacity=0.75),
        _lines("near misses", nx, ny, NEAR_MISS_LINE),
    ]
    ids = rollout.node_ids
    traces.append(
        go.Scatter(
            _validate=False,
            x=mx,
            y=my,
            mode="markers",
            marker={"symbol": "line-ns", "size": 12, "color": "#475569", "line": {"width": 2, "color": "#475569"}},
            customdata=np.array([c.key for c in drawn_chains], dtype=np.int32),
            hovertext=[
                f"<b>{len(c.calls)} calls collapsed</b>: {plot(ids[c.calls[0]])} … {plot(ids[c.calls[-1]])}"
                f"<br>the prompt grows by {c.token_growth:,} tokens<br>click to expand"
                for c in drawn_chains
            ],
            hoverinfo="text",
            unselected={"marker": {"opacity": 1}},
            name="chains",
            showlegend=False,
        )
    )
    traces.append(
        go.Scatter(
            _validate=False,
            x=[lb[0] for lb in labels],
            y=[lb[1] for lb in labels],
            text=[lb[2] for lb in labels],
            textposition=[lb[3] for lb in labels],
            textfont={"size": 10, "color": [lb[4] for lb in labels]},
            mode="markers+text",
            marker={"size": 14, "opacity": 0},  # invisible: sets how far plotly puts the text from the point (7 px)
            hoverinfo="skip",
            # a click selects a point of the calls trace; plotly would fade every other trace's points
            unselected={"marker": {"opacity": 0}, "textfont": {"color": "#475569"}},
            name="labels",
            showlegend=False,
            cliponaxis=False,
        )
    )
    _overlays(traces, x, y, [pos[v] for v in dimmed if v in pos], [pos[v] for v in highlighted if v in pos])
    for trace in traces:
        if trace.name not in SKELETON:
            trace.xaxis = MARKS_AXIS
            trace.marker.maxdisplayed = _cull(trace)
    annotations: list = []
    if centre is not None and highlight is not None:  # boxed as the browser boxes a selection (rings)
        shapes += selection_shapes(float(x[centre]), float(y[centre]), ids[highlight])
    # built without plotly's per-property validation (our own values; at 5,000 calls validating the
    # arrays took most of the figure's 0.25 s)
    fig = go.Figure(data=traces, _validate=False)
    fig.update_layout(
        _layout(rollout.session_id, highlight, focus, fit_all, annotations, shapes, height, xr, yr, overview)
    )
    nodes = {v: (float(x[k]), float(y[k])) for k, v in enumerate(vis)}
    folded = {call: (float(mx[k]), float(my[k])) for k, chain in enumerate(drawn_chains) for call in chain.calls}
    return fig, Targets(nodes, folded)


def _selected_label(x: float, y: float, node_id: str) -> dict:
    return {
        "x": x, "y": y, "xref": "x", "yref": "y", "text": f"<b>{_label(node_id)}</b>", "showarrow": True,
        "arrowhead": 0, "ax": 0, "ay": -30, "bgcolor": "#ffffff", "bordercolor": SELECTED_RING, "borderwidth": 1,
        "font": {"size": 12, "color": SELECTED_RING}, "name": "selected",
    }  # fmt: skip


def drawn_point(fig: go.Figure, index: int) -> tuple[float, float] | None:
    """Where call ``index`` (arrival index) is drawn in the figure's ``calls`` trace, or None when it
    is not drawn (inside a collapsed chain: point k is not call k, the trace's customdata holds each
    point's call)."""
    nodes = next((t for t in fig.data if t.name == "calls"), None)
    if nodes is None or nodes.x is None:
        return None
    drawn = list(nodes.customdata) if nodes.customdata is not None else list(range(len(nodes.x)))
    if index not in drawn:
        return None
    k = drawn.index(index)
    return float(nodes.x[k]), float(nodes.y[k])


def mark_selected(fig: go.Figure, index: int, node_id: str) -> go.Figure:
    """Ring the selected call ``index`` (arrival index) and box its id above it, in place: a figure
    with the selection drawn in (a trace and an annotation; the box of a call chosen outside the
    chart goes), without moving the view (``uirevision`` unchanged). The app does not send such a
    figure: the browser draws :func:`rings` over the unchanged one. Nothing else changes: no other
    call fades."""
    point = drawn_point(fig, index)
    if point is None:
        return fig
    x, y = point
    fig.add_trace(
        go.Scatter(
            x=[x], y=[y], mode="markers", hoverinfo="skip", showlegend=False, name="selected", xaxis=MARKS_AXIS,
            marker={"size": 23, "symbol": "circle-open", "color": SELECTED_RING, "line": {"width": 3}},
            unselected={"marker": {"opacity": 1}},
        )
    )  # fmt: skip
    # one box: the selected call's (a call chosen earlier outside the chart was boxed by dag_figure)
    fig.layout.shapes = [sh for sh in fig.layout.shapes if not (sh.name or "").startswith(RING)]
    others = [a for a in fig.layout.annotations if getattr(a, "name", None) != "selected"]
    fig.layout.annotations = [*others, _selected_label(x, y, node_id)]
    _clear_labels_under_box(fig, x, y, node_id)
    return fig


def labels_under_box(fig: go.Figure, x: float, y: float, node_id: str) -> list[int]:
    """The points of the labels trace the selected call's box (at ``x``, ``y``) would cover in the
    default view: its own plain label and any neighbour's it collides with. Labels placed by
    :func:`dag_figure` for a call chosen outside the chart already kept clear of its box."""
    labels = next((t for t in fig.data if t.name == "labels"), None)
    xr, yr, height = fig.layout.xaxis.range, fig.layout.yaxis.range, fig.layout.height
    if labels is None or labels.x is None or not len(labels.x) or xr is None or yr is None or height is None:
        return []
    sx, sy = PLOT_WIDTH / (xr[1] - xr[0]), (height - 120) / (yr[1] - yr[0])

    def px(xv: float, yv: float) -> tuple[float, float]:
        return (xv - xr[0]) * sx, (yr[1] - yv) * sy

    # a margin: the chart is often narrower than PLOT_WIDTH (the split pane at 1440 px is ~550 px)
    x0, y0, x1, y1 = _selected_box(*px(x, y), node_id)
    box = (x0 - BOX_MARGIN, y0 - 2, x1 + BOX_MARGIN, y1 + 2)
    sides = labels.textposition
    keep = []
    for k, (lx, ly, text) in enumerate(zip(labels.x, labels.y, labels.text, strict=True)):
        side = sides[k] if isinstance(sides, (list, tuple)) else sides
        a0, b0, a1, b1 = _label_box(*px(lx, ly), text, side)
        own = lx == x and ly == y
        keep.append(not own and not (a0 < box[2] and box[0] < a1 and b0 < box[3] and box[1] < b1))
    return [k for k, ok in enumerate(keep) if not ok]


RING = "rg-ring-"  # the names of the shapes that ring calls start with this (the browser replaces them)
RING_SELECTED, RING_BOX, RING_STEM, RING_COVER, RING_HIT = (
    f"{RING}{part}" for part in ("selected", "box", "stem", "cover", "hit")
)
SELECTED_R = 11.5  # px: the selected call's ring (radius), over a 10-13 px marker
HIT_R = 10.5


def _at(x: float, y: float, **shape) -> dict:
    """A shape anchored at data point (x, y), sized in px from it (y up): the same at any zoom."""
    return {"xref": "x", "yref": "y", "xsizemode": "pixel", "ysizemode": "pixel", "xanchor": x, "yanchor": y,
            "layer": "above", **shape}  # fmt: skip


def selection_shapes(x: float, y: float, node_id: str, covers: Collection[tuple[float, float, Box]] = ()) -> list[dict]:
    """The selected call at (x, y) as layout shapes: a thick dark ring, its id boxed 20-40 px above
    it on a stem (a white box whose label is the id, escaped for plotly), and a white cover over
    each label in ``covers`` ((x, y, box in px around that label's point, y down): the labels the box
    would overlap, its own plain label among them). Shapes, not an annotation and a trace: moving
    them is one cheap ``Plotly.relayout`` of the shapes (an annotation or a restyle makes plotly
    draw the whole chart again; docs/performance.md)."""
    w = 7.5 * len(node_id[:LABEL_CHARS]) + 10
    out = [
        _at(lx, ly, type="rect", name=RING_COVER, x0=a0 - 1, x1=a1 + 1, y0=-b1 - 1, y1=-b0 + 1,
            line={"width": 0}, fillcolor="#ffffff")
        for lx, ly, (a0, b0, a1, b1) in covers
    ]  # fmt: skip
    out += [
        _at(x, y, type="line", name=RING_STEM, x0=0, x1=0, y0=SELECTED_R + 1, y1=20,
            line={"color": SELECTED_RING, "width": 1}),
        _at(x, y, type="rect", name=RING_BOX, x0=-w / 2, x1=w / 2, y0=20, y1=40, fillcolor="#ffffff",
            line={"color": SELECTED_RING, "width": 1},
            label={"text": f"<b>{_label(node_id)}</b>", "font": {"size": 12, "color": SELECTED_RING},
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
    The browser puts them in place of the figure's own ``rg-ring-`` shapes. JSON data only: the
    one text, the call's id, is escaped for plotly (rollout_graph.escape); no HTML is built."""
    points = _near_view(fig, sorted({p for i in ringed if (p := targets.point(i)) is not None}))
    shapes = hit_shapes(points)
    point = targets.nodes.get(selected) if selected is not None else None
    if selected is not None and point is not None:
        node_id = rollout.calls[selected].node_id
        shapes += selection_shapes(point[0], point[1], node_id, _covers(fig, point[0], point[1], node_id))
    return {"shapes": shapes}


MAX_HIT_RINGS = 300  # hit rings drawn at most: each is a shape plotly draws on every pan (docs/user-guide.md)


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
        out.append((float(labels.x[k]), float(labels.y[k]), _label_box(0.0, 0.0, labels.text[k], side)))
    return out


def _clear_labels_under_box(fig: go.Figure, x: float, y: float, node_id: str) -> None:
    """Leave out the labels the selected call's box would cover (:func:`labels_under_box`; hover
    still shows their ids), so the boxed id never overlaps a neighbour's label."""
    covered = set(labels_under_box(fig, x, y, node_id))
    if not covered:
        return
    labels = next(t for t in fig.data if t.name == "labels")
    sides = labels.textposition
    pick = [k for k in range(len(labels.x)) if k not in covered]
    colours = labels.textfont.color
    labels.update(
        x=[labels.x[k] for k in pick],
        y=[labels.y[k] for k in pick],
        text=[labels.text[k] for k in pick],
        textposition=[sides[k] for k in pick] if isinstance(sides, (list, tuple)) else sides,
        textfont={"color": [colours[k] for k in pick] if isinstance(colours, (list, tuple)) else colours},
    )
    labels.marker.maxdisplayed = max(1, len(pick))


def _layout(
    session_id: str,
    highlight: int | None,
    focus: int | None,
    fit_all: bool,
    annotations: list,
    shapes: list,
    height: int,
    xr: list[float],
    yr: list[float],
    overview: bool,
) -> dict:
    """The figure's layout: the default view's ranges, the overview (range slider), pan and click
    selection; ``uirevision`` changes only with what moves the view (a call chosen outside the
    chart, a focus, Fit all), so a click keeps plotly's zoom and pan."""
    return dict(
        annotations=annotations,
        shapes=[shape for shape in shapes if shape is not None],
        height=height,
        margin={"l": 10, "r": 10, "t": 10, "b": 16},  # b: the axis title's descenders (p, g) were cut at 10
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        dragmode="pan",
        # a click is an event only: the browser's DAG client sends it (a plotly selection would be
        # kept across reruns of an unchanged figure, and a second click on its point would clear it)
        clickmode="event",
        hovermode="closest",
        hoverdistance=12,
        uirevision=f"{session_id}:{highlight}:{focus}:{'fit' if fit_all else 'window'}",
        xaxis={
            "range": xr,
            "showticklabels": False,
            "gridcolor": "#f1f5f9",
            "zeroline": False,
            "title": {
                "text": "depth → (a thick edge is a collapsed chain of calls)",
                "font": {"size": 11},
                "standoff": 2,
            },
            "rangeslider": {
                "visible": overview,
                "thickness": 0.09,
                "bgcolor": "#f8fafc",
                "bordercolor": "#e2e8f0",
                "borderwidth": 1,
                "yaxis": {"rangemode": "auto"},  # the whole rollout's outline, whatever the lanes in view
            },
        },
        yaxis={"range": yr, "showticklabels": False, "gridcolor": "#f8fafc", "zeroline": False, "fixedrange": False},
        xaxis2={"overlaying": "x", "matches": "x", "visible": False},
    )


def _cull(trace: go.Scatter) -> int:
    """``marker.maxdisplayed`` for a marker trace: as many as it has points. Plotly then draws
    only the markers (and their text) inside the current view and draws them again after each pan
    or zoom, instead of an SVG element for every point of the rollout; with that many allowed, none
    in view is ever left out. At 5,000 calls the default view shows about 80 of 2,400 nodes, and
    the chart draws in about 0.15 s instead of 1.3 s (docs/performance.md)."""
    return max(1, len(trace.x) if trace.x is not None else 0)


def _overlays(
    traces: list[go.Scatter], x: np.ndarray, y: np.ndarray, dimmed: list[int], highlighted: list[int]
) -> None:
    """A white veil over dimmed calls and a ring around highlighted ones; neither takes hover or
    clicks (the calls trace underneath does), and neither fades when a call is selected."""
    for nodes, name, marker in (
        (dimmed, "dimmed", {"color": "rgba(255,255,255,0.78)", "size": 15, "symbol": "square", "line": {"width": 0}}),
        (
            highlighted,
            "highlighted",
            {"color": HIGHLIGHT_RING, "size": 21, "symbol": "circle-open", "line": {"width": 2.5}},
        ),
    ):
        if not nodes:
            continue
        at = np.array(sorted(nodes), dtype=int)
        traces.append(
            go.Scatter(
            _validate=False,
                x=x[at], y=y[at], mode="markers", marker=marker, name=name, hoverinfo="skip", showlegend=False,
                unselected={"marker": {"opacity": 1}},
            )
        )  # fmt: skip


_ITEM = "display:inline-flex;align-items:center;gap:5px;margin-right:16px;white-space:nowrap"


def legend_html(shares_label: str | None = None, newest: bool = False) -> str:
    """The legend under the DAG, one meaning per chip (the glossary's words); with ``shares_label``
    (calls coloured by a correction's share of tokens affected) a first line explains that scale;
    ``newest``: the newest-call ring is drawn (a growing trace is followed)."""
    roles = "".join(
        f'<span style="{_ITEM}"><span style="color:{color};font-size:15px;-webkit-text-stroke:0.4px #334155">'
        f"{ROLE_GLYPHS[role]}</span>{html_text(ROLE_LABELS[role])}</span>"
        for role, color in ROLE_COLORS.items()
    )
    kinds = "".join(
        f'<span style="{_ITEM}"><span style="color:#475569;font-size:15px">{KIND_GLYPHS[k]}</span>{html_text(KIND_LABELS[k])}</span>'
        for k in (ROOT, FORK, LEAF, INNER)
    )
    edges = (
        f'<span style="{_ITEM}"><span style="color:#cbd5e1;font-weight:700">──</span>'
        "exact link: the call extends its parent's ids</span>"
        f'<span style="{_ITEM}"><span style="display:inline-block;width:22px;height:5px;background:#94a3b8;border-radius:2px"></span>'
        "collapsed chain of inner calls (click its handle to expand)</span>"
        f'<span style="{_ITEM}"><span style="color:#d97706;font-weight:700">- -</span>'
        "near miss: a root that nearly continued that call (broken replay, compaction, resume)</span>"
    )
    ring = "display:inline-block;width:11px;height:11px;border-radius:50%;box-sizing:border-box"
    rings = (
        f'<span style="{_ITEM}"><span style="{ring};border:3px solid {SELECTED_RING}"></span>'
        "selected call (its id boxed)</span>"
        f'<span style="{_ITEM}"><span style="{ring};border:2px solid {HIGHLIGHT_RING}"></span>'
        "search hit or chosen findings group</span>"
        + (
            f'<span style="{_ITEM}"><span style="{ring};border:2px solid {NEWEST_RING}"></span>'
            "newest call of the growing trace</span>"
            if newest
            else ""
        )
    )
    share = ""
    if shares_label is not None:
        bar = f"display:inline-block;width:90px;height:10px;border-radius:2px;background:{share_gradient()}"
        grey = f"display:inline-block;width:10px;height:10px;border-radius:5px;background:{NO_SHARE}"
        share = (
            f'<div class="rg-dag-share-legend"><span style="{_ITEM}">Fill: share of tokens affected by '
            f"<b>{html_text(shares_label)}</b></span>"
            f'<span style="{_ITEM}">0 %<span style="{bar}"></span>100 % of the call\'s compared sampled tokens '
            f'clipped or masked</span><span style="{_ITEM}"><span style="{grey}"></span>no compared tokens</span>'
            f'<span style="{_ITEM}">inner calls: small filled circles</span></div>'
        )
    return (
        f'<div style="font-size:12px;color:#334155;line-height:1.7">{share}<div>{roles}</div><div>{kinds}</div>'
        f"<div>{edges}</div><div>{rings}</div></div>"
    )
