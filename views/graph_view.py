"""The DAG panel: the figure, its legend, the click handling and a call picker."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from graph.core.rollout import Rollout
from views import state
from views.dag import dag_figure, legend_html
from views.layout import layout


@st.cache_resource(max_entries=16, show_spinner=False)
def _figure(
    key: str,
    session_id: str,
    highlight: int | None,
    near_misses: bool,
    _rollout: Rollout,
    dimmed: frozenset[int] = frozenset(),
    highlighted: frozenset[int] = frozenset(),
) -> go.Figure:
    """The figure is a pure function of the rollout, the outside highlight, the near-miss toggle
    and the dimmed (filtered out) and ringed (search hits, a findings group) calls."""
    return dag_figure(_rollout, highlight, layout(_rollout.topology), near_misses, dimmed, highlighted)


def render(
    rollout: Rollout,
    workspace_key: str,
    near_misses: bool,
    dimmed: frozenset[int] = frozenset(),
    highlighted: frozenset[int] = frozenset(),
) -> None:
    st.html(legend_html())
    figure = _figure(
        workspace_key, rollout.session_id, state.highlight(rollout), near_misses, rollout, dimmed, highlighted
    )
    event = st.plotly_chart(
        figure,
        key=f"dag-{workspace_key}-{rollout.session_id}-{state.highlight(rollout)}",
        on_select="rerun",
        selection_mode="points",
        width="stretch",
        config={"displaylogo": False, "scrollZoom": True, "modeBarButtonsToRemove": ["lasso2d", "select2d"]},
    )
    state.chart_click(rollout, event.selection.points if event else [])
    ids = [c.node_id for c in rollout.calls]
    current = state.current_node(rollout)
    picked = st.selectbox(
        "Call",
        options=range(len(ids)),
        index=current,
        format_func=lambda i: f"{ids[i]} · #{i} · {rollout.node_roles[i]}",
        placeholder="Click a node in the graph, or pick a call",
        key=f"picker-{workspace_key}-{rollout.session_id}-{current}",
    )
    if picked is not None and picked != current:
        state.select_node(rollout, picked)
        st.rerun()
