"""The rollout DAG as a plotly figure (pure).

Entry points: ``dag_drawing(rollout, highlight=None, **options) -> (figure, Targets)`` and
``dag_figure`` (the figure alone). Options (all optional, neutral defaults; call indices as sets):
``near_misses`` (dashed links, roots laid out after the call they nearly continued), ``collapse``
and ``expanded`` (linear chains as one thick edge), ``focus`` (one call's subtree), ``keep``,
``dimmed`` (veiled by the filters), ``highlighted`` (ringed), ``fit_all`` (everything in view),
``shares``/``shares_label`` (calls filled by a correction's share of tokens instead of role).
``line_segments`` reads a drawn line shape back.

The figure: trace 0 ``overview`` (the outline the range slider shows), 1 ``calls`` (one marker
per drawn call, ``customdata`` its arrival index), 2 ``chains`` (each collapsed chain's handle,
``customdata`` its key), 3 ``labels``; then the overlays. Edges, chain lines and near-miss links
are one SVG path shape each. It depends only on its arguments, never on clicks in the chart, so
plotly keeps its zoom and pan across reruns; the selection is drawn over it (rings.py).

Where it sits: view model (view.py) -> geometry and labels -> this figure -> rings; cached by
views/state/dag_figures.py, drawn by views/panels/graph.py.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import plotly.graph_objects as go

from rollout_graph.analysis.chains import Chain
from rollout_graph.analysis.near_miss import COMPACTION
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import Kind
from rollout_graph.escape import plot
from rollout_graph.ui.builders.dag.geometry import PLOT_WIDTH, box_below, default_view
from rollout_graph.ui.builders.dag.labels import Label, place_labels
from rollout_graph.ui.builders.dag.rings import selection_shapes
from rollout_graph.ui.builders.dag.targets import Targets
from rollout_graph.ui.builders.dag.view import CHAIN_LENGTH, DagView, dag_view, node_kind
from rollout_graph.ui.builders.mismatch import NO_SHARE, share_colours
from rollout_graph.ui.builders.palette import (
    AGENT,
    FORK,
    HIGHLIGHT_RING,
    INNER,
    LEAF,
    NEAR_MISS_DRAWN,
    ROLE_COLORS,
    ROLE_LINES,
    ROOT,
    role_symbol,
)

ROLE_ORDER = list(ROLE_COLORS)
SYMBOL_CODES = {ROOT: 2, FORK: 1, LEAF: 0, INNER: 100}  # plotly symbol numbers: diamond, square, circle, circle-open
HOVER_FINDINGS = 3
OVERVIEW, CALLS, CHAINS, LABELS = range(4)  # trace numbers (curve_number in a selection)
FILLED = {100: 0, 300: 200, 128: 28}  # open symbols (inner calls) -> filled, when calls are coloured by share
SHARE_OUTLINE = "#475569"


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


def _curves(name: str, xs: np.ndarray, ys: np.ndarray, line: dict) -> dict | None:
    """Links (one row of ``xs``/``ys`` each: start, end) as one path shape: straight along a lane,
    else an S-curve that leaves and arrives level, so a link to a call several lanes down bends
    between the columns instead of running through the calls stacked in them."""
    if len(xs) == 0:
        return None
    moves = []
    for (a, c), (b, d) in zip(np.round(xs, 3), np.round(ys, 3), strict=True):
        if b == d:
            moves.append(f"M{a:.4g},{b:.4g}L{c:.4g},{d:.4g}")
            continue
        m = (a + c) / 2 if abs(c - a) >= 0.3 else a + 0.6  # a link straight down bows to the right
        moves.append(f"M{a:.4g},{b:.4g}C{m:.4g},{b:.4g} {m:.4g},{d:.4g} {c:.4g},{d:.4g}")
    return {
        "type": "path", "path": "".join(moves), "xref": "x", "yref": "y", "layer": "between", "line": line,
        "fillcolor": "rgba(0,0,0,0)", "name": name,
    }  # fmt: skip


def line_segments(figure: go.Figure, name: str) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """The links of the figure's line shape ``name`` ("edges", "chain lines", "near misses") by
    their ends: ((x0, y0), (x1, y1)) each, straight or curved; none when the figure draws no such line."""
    shape = next((sh for sh in figure.layout.shapes if sh.name == name), None)
    if shape is None:
        return []
    out = []
    for move in shape.path.split("M")[1:]:
        start, rest = move.split("L") if "L" in move else move.split("C")
        a, b = (float(v) for v in start.split(","))
        c, d = (float(v) for v in rest.split()[-1].split(","))
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


def dag_figure(rollout: Rollout, highlight: int | None = None, **options) -> go.Figure:
    """The DAG figure (see the module docstring for the traces and the keyword arguments)."""
    return dag_drawing(rollout, highlight, **options)[0]


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
    browser draws: rings.py)."""
    keep = set(keep) | set(highlighted) | ({highlight} if highlight is not None else set())
    view = dag_view(rollout, near_misses=near_misses, collapse=collapse, expanded=expanded, focus=focus, keep=keep)
    vis = view.visible
    kinds = [node_kind(rollout, i) for i in vis]
    x = np.array([view.x[v] for v in vis], dtype=float)
    y = -np.array([view.y[v] for v in vis], dtype=float)
    pos = {v: k for k, v in enumerate(vis)}
    max_x = float(x.max()) if len(x) else 0.0
    centre = pos.get(highlight) if highlight is not None else None
    height, plot_h, xr, yr, overview = default_view(view, x, y, max_x, centre, fit_all)
    sx, sy = PLOT_WIDTH / (xr[1] - xr[0]), plot_h / (yr[1] - yr[0])

    drawn_chains = [c for c in view.chains if c.before in pos and c.after in pos]
    chain_lines, (mx, my) = _chain_geometry(drawn_chains, x, y, pos)
    labels = place_labels(rollout, vis, kinds, x, y, drawn_chains, mx, my, highlight, centre, xr, yr, sx, sy)
    ox, oy = _outline(x, y) if overview else ([], [])  # only needed when the range slider is shown
    traces = [
        go.Scatter(
            _validate=False,
            x=ox, y=oy, mode="lines", fill="toself", fillcolor=OUTLINE_FILL, line={"width": 0}, hoverinfo="skip",
            showlegend=False, name="overview",
        ),
        _calls_trace(rollout, vis, kinds, x, y, shares, shares_label),
        _chains_trace(rollout, drawn_chains, mx, my),
        _labels_trace(labels),
    ]  # fmt: skip
    _overlays(traces, x, y, [pos[v] for v in dimmed if v in pos], [pos[v] for v in highlighted if v in pos])
    for trace in traces:
        if trace.name not in SKELETON:
            trace.xaxis = MARKS_AXIS
            trace.marker.maxdisplayed = _cull(trace)
    shapes = _link_shapes(rollout, view, x, y, pos, chain_lines, near_misses)
    if centre is not None and highlight is not None:  # boxed as the browser boxes a selection (rings)
        below = box_below(float(y[centre]), yr, plot_h)
        shapes += selection_shapes(float(x[centre]), float(y[centre]), rollout.node_ids[highlight], below=below)
    # built without plotly's per-property validation (our own values; at 5,000 calls validating the
    # arrays took most of the figure's 0.25 s)
    fig = go.Figure(data=traces, _validate=False)
    fig.update_layout(_layout(rollout.session_id, highlight, focus, fit_all, [], shapes, height, xr, yr, overview))
    nodes = {v: (float(x[k]), float(y[k])) for k, v in enumerate(vis)}
    folded = {call: (float(mx[k]), float(my[k])) for k, chain in enumerate(drawn_chains) for call in chain.calls}
    return fig, Targets(nodes, folded)


def _chain_geometry(
    drawn_chains: list[Chain], x: np.ndarray, y: np.ndarray, pos: dict[int, int]
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Each collapsed chain as a thick edge trimmed off its end markers ((xs, ys), one row per
    chain: start, end) and its handle in the middle (mx, my)."""
    cx0 = np.array([x[pos[c.before]] for c in drawn_chains])
    cx1 = np.array([x[pos[c.after]] for c in drawn_chains])
    cy0 = np.array([y[pos[c.before]] for c in drawn_chains])
    cy1 = np.array([y[pos[c.after]] for c in drawn_chains])
    trim = 0.22
    lx0, lx1 = cx0 + trim, cx1 - trim
    ly0, ly1 = cy0 + (cy1 - cy0) * trim / CHAIN_LENGTH, cy1
    return (np.column_stack([lx0, lx1]), np.column_stack([ly0, ly1])), ((cx0 + cx1) / 2, (cy0 + cy1) / 2)


def _calls_trace(
    rollout: Rollout,
    vis: list[int],
    kinds: list[Kind],
    x: np.ndarray,
    y: np.ndarray,
    shares: Mapping[int, float] | None,
    shares_label: str,
) -> go.Scatter:
    """One marker per drawn call: filled by role (or by a correction's share), shaped by kind."""
    roles = rollout.node_roles
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
    return go.Scatter(
        _validate=False,
        x=x,
        y=y,
        # markers only: a call left unlabelled shows its id on hover, and the selected call's id is
        # boxed by the rings (no hidden text: plotly drew it black once a label made room for a box)
        mode="markers",
        name="calls",
        customdata=np.array(vis, dtype=np.int32),
        marker={**fill, "symbol": symbols, "size": sizes, "line": {"color": outlines, "width": 1}},
        hovertext=hovers,
        hoverinfo="text",
        # An (empty) selection from the start: every call is "unselected" (full opacity) and
        # stays so; the selected call is ringed and boxed by shapes (rings.py), not by plotly's
        # selected style, which drew it paler. No `selected` style: with one, Streamlit receives
        # no click selection from an SVG scatter.
        selectedpoints=[],
        unselected={"marker": {"opacity": 1.0}},
        cliponaxis=False,
        showlegend=False,
    )


def _chains_trace(rollout: Rollout, drawn_chains: list[Chain], mx: np.ndarray, my: np.ndarray) -> go.Scatter:
    """A clickable handle in the middle of each collapsed chain (``customdata``: the chain's key)."""
    ids = rollout.node_ids
    return go.Scatter(
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


def _labels_trace(labels: list[Label]) -> go.Scatter:
    """The placed labels as one text-only trace (views/builders/dag/labels.py)."""
    return go.Scatter(
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


def _link_shapes(
    rollout: Rollout,
    view: DagView,
    x: np.ndarray,
    y: np.ndarray,
    pos: dict[int, int],
    chain_lines: tuple[np.ndarray, np.ndarray],
    near_misses: bool,
) -> list[dict]:
    """The lines: exact links between drawn calls (thin), collapsed chains (thick) and near-miss
    links (dashed amber, only with ``near_misses``), one path shape each."""
    vis = view.visible
    direct = [v for v in vis if view.drawn_parent[v] is not None and v not in view.via and view.drawn_parent[v] in pos]
    par = np.array([pos[p] for v in direct if (p := view.drawn_parent[v]) is not None], dtype=int)
    kid = np.array([pos[v] for v in direct], dtype=int)
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
        _lines("chain lines", *chain_lines, CHAIN_LINE, opacity=0.75),
        _curves("near misses", nx, ny, NEAR_MISS_LINE),
    ]
    return [s for s in shapes if s is not None]


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
