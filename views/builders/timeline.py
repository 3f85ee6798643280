"""The timeline (pure): calls as bars over wall time, a lane per concurrent call, coloured and
patterned by role, TTFT ticked where recorded, the selected call outlined.

Entry points: ``timeline_figure(rollout, timeline, selected)`` (one bar trace per role; each bar's
``customdata`` is its call's arrival index) and ``clicked_call(points)`` (a click back to a call).

Where it sits: drawn by views/panels/timeline.py under the split view."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import plotly.graph_objects as go

from rollout_graph.analysis.timing import Timeline
from rollout_graph.core.roles import DISCARDED, ROLES
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import plot
from rollout_graph.ui.builders.palette import ROLE_COLORS, ROLE_LINES, ROLE_PATTERNS

SELECTED_LINE = "#e11d48"
TTFT_NAME = "time to first token"


def _hover(rollout: Rollout, tl: Timeline, i: int) -> str:
    call = rollout.calls[i]
    role = rollout.node_roles[i]
    start = datetime.fromtimestamp(tl.origin + tl.start[i], tz=UTC).strftime("%H:%M:%S.%f")[:-3]
    lines = [
        f"<b>{plot(call.node_id)}</b> · {role} · arrival #{i}",
        f"start {start} UTC (+{tl.start[i]:.3f} s) · {tl.end[i] - tl.start[i]:.3f} s",
    ]
    if not np.isnan(tl.ttft[i]):
        lines.append(f"first token after {tl.ttft[i] - tl.start[i]:.3f} s")
    kept = rollout.topology.discarded.get(i)
    if kept is not None:
        lines.append(f"discarded: {plot(rollout.calls[kept].node_id)} continued")
    lines.append(f"sampled {call.n_sampled:,} tokens · finish {plot(str(call.finish_reason))}")
    return "<br>".join(lines)


def timeline_figure(rollout: Rollout, tl: Timeline, selected: int | None = None) -> go.Figure:
    """Bars from start to end per call; ``selected`` is outlined (and kept in view by the caller)."""
    roles = rollout.node_roles
    fig = go.Figure()
    for role in ROLES:
        members = np.array([i for i in range(len(roles)) if roles[i] == role and tl.lane[i] >= 0], dtype=int)
        if not members.size:
            continue
        is_selected = members == selected
        fig.add_trace(
            go.Bar(
                name=role,
                orientation="h",
                base=tl.start[members],
                x=np.maximum(tl.end[members] - tl.start[members], 1e-3),
                y=tl.lane[members],
                customdata=members,
                text=[plot(rollout.calls[i].node_id) for i in members],
                textposition="inside",
                insidetextanchor="start",
                textfont={"size": 10},
                hovertext=[_hover(rollout, tl, int(i)) for i in members],
                hoverinfo="text",
                marker={
                    "color": ROLE_COLORS[role],
                    "opacity": 0.75 if role == DISCARDED else 1.0,
                    "pattern": {"shape": ROLE_PATTERNS[role], "fgcolor": ROLE_LINES[role], "size": 6, "solidity": 0.25},
                    "line": {
                        "color": np.where(is_selected, SELECTED_LINE, ROLE_LINES[role]).tolist(),
                        "width": np.where(is_selected, 3.0, 0.5).tolist(),
                    },
                },
                width=0.8,
            )
        )
    ticks = np.array([i for i in range(len(roles)) if not np.isnan(tl.ttft[i])], dtype=int)
    if ticks.size:
        fig.add_trace(
            go.Scatter(
                name=TTFT_NAME,
                x=tl.ttft[ticks],
                y=tl.lane[ticks],
                mode="markers",
                marker={"symbol": "line-ns", "size": 16, "line": {"width": 2, "color": "#0f172a"}},
                hoverinfo="skip",
            )
        )
    lanes = max(tl.n_lanes, 1)
    fig.update_layout(
        barmode="overlay",
        height=min(630, 140 + 34 * lanes),
        margin={"l": 10, "r": 10, "t": 36, "b": 40},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        clickmode="event+select",
        dragmode="pan",
        hovermode="closest",
        uirevision=rollout.session_id,
        # above the plot: below it, the legend sat on the time axis' ticks and title
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0, "xanchor": "left"},
        xaxis={"title": {"text": "seconds since the first call started", "font": {"size": 11}}, "gridcolor": "#f1f5f9"},
        yaxis={
            "title": {"text": "lane (calls in flight together)", "font": {"size": 11}},
            "autorange": "reversed",
            "tickmode": "array",
            "tickvals": list(range(lanes)),
            "ticktext": [str(k + 1) for k in range(lanes)],
            "gridcolor": "#f8fafc",
        },
    )
    return fig


def clicked_call(points: list[dict]) -> int | None:
    """The call a timeline click hit (from the bar's customdata), if any."""
    for p in points:
        data = p.get("customdata")
        if isinstance(data, list):
            data = data[0] if data else None
        if isinstance(data, (int, float)):
            return int(data)
    return None
