"""The rollout DAG as a plotly figure (pure), and its legend as HTML (pure).

The figure depends only on the rollout and on ``highlight`` (a node chosen from outside the
chart: a deep link, a finding), never on clicks made in the chart itself, so it stays identical
across reruns and plotly keeps its own selection, zoom and pan (``uirevision``).
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from graph.core.rollout import Rollout
from views.layout import Layout, layout
from views.palette import (
    FORK,
    INNER,
    KIND_GLYPHS,
    KIND_LABELS,
    LEAF,
    NEAR_MISS_DRAWN,
    ROLE_COLORS,
    ROLE_GLYPHS,
    ROLE_LABELS,
    ROLE_LINES,
    ROOT,
    role_symbol,
)

ROLE_ORDER = list(ROLE_COLORS)
SYMBOL_CODES = {ROOT: 2, FORK: 1, LEAF: 0, INNER: 100}  # plotly symbol numbers: diamond, square, circle, circle-open
HOVER_FINDINGS = 3
HIGHLIGHT_RING = "#e11d48"  # search hits and a chosen findings group
LABEL_LIMIT = 150  # call ids are printed beside the nodes up to this many calls


def node_kind(rollout: Rollout, i: int) -> str:
    topo = rollout.topology
    if topo.parents[i] is None:
        return ROOT
    if len(topo.children[i]) > 1:
        return FORK
    if not topo.children[i]:
        return LEAF
    return INNER


def _hover(rollout: Rollout, i: int, role: str, kind: str) -> str:
    call = rollout.calls[i]
    lines = [
        f"<b>{html.escape(call.node_id)}</b> · {role} · {kind}",
        f"arrival #{i} · prompt {call.n_prompt:,} · sampled {call.n_sampled:,} tokens",
        f"finish: {html.escape(str(call.finish_reason))}",
    ]
    if call.logprobs_aligned and call.n_sampled:
        lines.append(f"mean logprob {float(np.nanmean(call.sampled_logprobs)):.3f}")
    kept = rollout.topology.discarded.get(i)
    if kept is not None:
        lines.append(f"discarded: {html.escape(rollout.calls[kept].node_id)} continued")
    findings = rollout.findings_for(i)
    for f in findings[:HOVER_FINDINGS]:
        lines.append(f"{f.level} {html.escape(f.code)}")
    if len(findings) > HOVER_FINDINGS:
        lines.append(f"… {len(findings) - HOVER_FINDINGS} more findings")
    return "<br>".join(lines)


def dag_figure(
    rollout: Rollout,
    highlight: int | None = None,
    lay: Layout | None = None,
    near_misses: bool = False,
    dimmed: frozenset[int] = frozenset(),
    highlighted: frozenset[int] = frozenset(),
) -> go.Figure:
    """``dimmed`` calls are veiled (filtered out); ``highlighted`` ones ringed (search hits, a
    findings group). Both are drawn as overlay traces after the calls, so trace 1 stays the calls."""
    lay = lay or layout(rollout.topology)
    n = len(rollout.calls)
    roles = rollout.node_roles
    kinds = [node_kind(rollout, i) for i in range(n)]
    x = np.asarray(lay.x, dtype=float)
    y = -np.asarray(lay.y, dtype=float)
    children = np.array([c for c, p in enumerate(rollout.topology.parents) if p is not None], dtype=int)
    parents = np.array([rollout.topology.parents[c] for c in children], dtype=int)
    # one line trace for every edge: (parent, child, gap) triples
    ex = np.column_stack([x[parents], x[children], np.full(children.shape[0], np.nan)]).ravel()
    ey = np.column_stack([y[parents], y[children], np.full(children.shape[0], np.nan)]).ravel()
    # Numbers, not strings, for colours and symbols: plotly validates numeric arrays in one step.
    role_codes = np.array([ROLE_ORDER.index(r) for r in roles], dtype=float)
    fig = go.Figure()
    fig.add_trace(
        go.Scattergl(
            x=ex,
            y=ey,
            mode="lines",
            line={"color": "#cbd5e1", "width": 1.2},
            hoverinfo="skip",
            showlegend=False,
            name="edges",
        )
    )
    fig.add_trace(
        go.Scattergl(
            x=x,
            y=y,
            mode="markers+text" if n <= LABEL_LIMIT else "markers",
            text=[c.node_id if len(c.node_id) <= 14 else c.node_id[:13] + "…" for c in rollout.calls]
            if n <= LABEL_LIMIT
            else None,
            textposition="top center",
            textfont={"size": 9, "color": "#64748b"},
            name="calls",
            customdata=np.arange(n, dtype=np.int32),
            marker={
                "color": role_codes,
                "colorscale": [[i / (len(ROLE_ORDER) - 1), ROLE_COLORS[r]] for i, r in enumerate(ROLE_ORDER)],
                "cmin": 0,
                "cmax": len(ROLE_ORDER) - 1,
                "symbol": np.array([role_symbol(SYMBOL_CODES[k], r) for k, r in zip(kinds, roles, strict=True)]),
                "size": np.array([13 if k in (ROOT, FORK) else 10 for k in kinds]),
                "line": {"color": [ROLE_LINES[r] for r in roles], "width": 1},
            },
            hovertext=[_hover(rollout, i, roles[i], kinds[i]) for i in range(n)],
            hoverinfo="text",
            selectedpoints=None if highlight is None else [highlight],
            selected={"marker": {"size": 18}},
            unselected={"marker": {"opacity": 0.6}, "textfont": {"color": "#94a3b8"}},
            showlegend=False,
        )
    )
    if near_misses:
        links = [m for m in rollout.near_misses.values() if m.kind in NEAR_MISS_DRAWN]
        nx = [v for m in links for v in (x[m.earlier], x[m.later], np.nan)]
        ny = [v for m in links for v in (y[m.earlier], y[m.later], np.nan)]
        fig.add_trace(
            go.Scattergl(
                x=nx,
                y=ny,
                mode="lines",
                line={"color": "#d97706", "width": 1.5, "dash": "dash"},
                hoverinfo="skip",
                showlegend=False,
                name="near misses",
            )
        )
    _overlays(fig, x, y, dimmed, highlighted)
    height = min(900, max(260, 28 * lay.n_lanes + 80))
    fig.update_layout(
        height=height,
        margin={"l": 10, "r": 10, "t": 10, "b": 30},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        dragmode="pan",
        clickmode="event+select",
        hovermode="closest",
        uirevision=rollout.session_id,
        xaxis={
            "title": {"text": "depth (calls from the root)", "font": {"size": 11}},
            "gridcolor": "#f1f5f9",
            "zeroline": False,
            "dtick": 1 if max(lay.x, default=0) < 40 else None,
        },
        yaxis={"showticklabels": False, "gridcolor": "#f8fafc", "zeroline": False},
    )
    return fig


def _overlays(
    fig: go.Figure, x: np.ndarray, y: np.ndarray, dimmed: frozenset[int], highlighted: frozenset[int]
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
        fig.add_trace(
            go.Scattergl(
                x=x[at], y=y[at], mode="markers", marker=marker, name=name, hoverinfo="skip", showlegend=False,
                unselected={"marker": {"opacity": 1}},
            )
        )  # fmt: skip


_ITEM = "display:inline-flex;align-items:center;gap:5px;margin-right:16px;white-space:nowrap"


def legend_html() -> str:
    roles = "".join(
        f'<span style="{_ITEM}"><span style="color:{color};font-size:15px;-webkit-text-stroke:0.4px #334155">'
        f"{ROLE_GLYPHS[role]}</span>{html.escape(ROLE_LABELS[role])}</span>"
        for role, color in ROLE_COLORS.items()
    )
    kinds = "".join(
        f'<span style="{_ITEM}"><span style="color:#475569;font-size:15px">{KIND_GLYPHS[k]}</span>{html.escape(KIND_LABELS[k])}</span>'
        for k in (ROOT, FORK, LEAF, INNER)
    )
    near = f'<span style="{_ITEM}"><span style="color:#d97706;font-weight:700">- -</span>near miss: nearly continued (history rewritten or compacted)</span>'
    return f'<div style="font-size:12px;color:#334155;line-height:1.9"><div>{roles}</div><div>{kinds}{near}</div></div>'
