"""The DAG panel: the figure, its legend, the click handling, chains, focus and a call picker.

The chart keeps one widget key per rollout; its figure is cached on what it draws (chains
expanded, focus, near-miss toggle, the call chosen outside the chart), never on chart clicks,
so a click in the chart does not rebuild it.
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from graph.analysis.chains import linear_chains, pinned_calls
from graph.core.rollout import Rollout
from views import state
from views.dag import CALLS, CHAINS, dag_figure, legend_html


@st.cache_resource(max_entries=32, show_spinner=False)
def _figure(
    key: str,
    session_id: str,
    highlight: int | None,
    near_misses: bool,
    collapse: bool,
    expanded: frozenset[int],
    focus: int | None,
    _rollout: Rollout,
) -> go.Figure:
    """A pure function of the rollout and the drawing options (never of chart clicks)."""
    return dag_figure(_rollout, highlight, near_misses=near_misses, collapse=collapse, expanded=expanded, focus=focus)


@st.cache_resource(max_entries=16, show_spinner=False)
def _chain_of(key: str, session_id: str, _rollout: Rollout) -> dict[int, int]:
    """call -> key of the collapsed chain hiding it (no call kept: the widest collapse)."""
    chains = linear_chains(_rollout.topology.parents, pinned_calls(_rollout))
    return {call: c.key for c in chains for call in c.calls}


def _per_session(name: str, rollout: Rollout, default):
    return st.session_state.setdefault(name, {}).setdefault(rollout.session_id, default)


def render(rollout: Rollout, workspace_key: str, near_misses: bool) -> None:
    expanded: set[int] = _per_session(state.DAG_EXPANDED, rollout, set())
    focus_ids: dict = st.session_state.setdefault(state.DAG_FOCUS, {})
    highlight = state.highlight(rollout)
    current = state.current_node(rollout)
    focus = None
    if focus_ids.get(rollout.session_id) is not None:
        focus = rollout.index_of(focus_ids[rollout.session_id])
    # a call chosen from outside is always drawn: expand the chain hiding it, leave a focus it is outside of
    if highlight is not None:
        hidden_in = _chain_of(workspace_key, rollout.session_id, rollout).get(highlight)
        if hidden_in is not None:
            expanded.add(hidden_in)
        if focus is not None and highlight not in _subtree(workspace_key, rollout, focus):
            focus_ids[rollout.session_id] = focus = None

    left, middle, right = st.columns([2, 2, 3], vertical_alignment="center")
    collapse = left.toggle(
        "Collapse linear chains", value=True, key=state.DAG_COLLAPSE,
        help="Runs of calls with one parent and one child are drawn as one thick edge. Roots, forks, leaves, "
        "retries, calls with findings and the selected call always stay nodes.",
    )  # fmt: skip
    if expanded and middle.button("Collapse expanded chains", key=f"dag-refold-{rollout.session_id}"):
        expanded.clear()
    if focus is not None:
        if right.button(
            f"Show the whole rollout (focused on {rollout.calls[focus].node_id})",
            key=f"dag-unfocus-{rollout.session_id}",
        ):
            focus_ids[rollout.session_id] = focus = None
    elif current is not None and rollout.topology.children[current] or current in rollout_continued(rollout):
        if right.button(
            f"Focus on the subtree of {rollout.calls[current].node_id}", key=f"dag-focus-{rollout.session_id}"
        ):
            focus_ids[rollout.session_id] = rollout.calls[current].node_id
            focus = current

    figure = _figure(
        workspace_key, rollout.session_id, highlight, near_misses, collapse, frozenset(expanded), focus, rollout
    )
    event = st.plotly_chart(
        figure,
        key=f"dag-{workspace_key}-{rollout.session_id}",
        on_select="rerun",
        selection_mode="points",
        width="stretch",
        config={"displaylogo": False, "scrollZoom": True, "modeBarButtonsToRemove": ["lasso2d", "select2d"]},
    )
    st.html(legend_html())
    chain = state.chart_click(rollout, event.selection.points if event else [], CALLS, CHAINS)
    if chain is not None:
        expanded.add(chain)
        st.rerun()
    ids = rollout.node_ids
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


def rollout_continued(rollout: Rollout) -> set[int]:
    from graph.analysis.chains import continuations

    return set(continuations(rollout).values())


@st.cache_resource(max_entries=16, show_spinner=False)
def _subtree_cached(key: str, session_id: str, focus: int, _rollout: Rollout) -> frozenset[int]:
    from views.dag import subtree

    return frozenset(subtree(_rollout, focus))


def _subtree(key: str, rollout: Rollout, focus: int) -> frozenset[int]:
    return _subtree_cached(key, rollout.session_id, focus, rollout)
