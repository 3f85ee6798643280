"""The timeline panel: the calls over wall time; a click selects the call (the DAG and the detail
follow) and the selected call is outlined on it.

Entry point: ``render(rollout, workspace_key)``; the figure is views/builders/timeline.py.

Where it sits: under the split view, in the explorer's selection fragment."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from rollout_graph.analysis.timing import Timeline, timeline
from rollout_graph.core.rollout import Rollout
from rollout_graph.ui import state
from rollout_graph.ui.builders.timeline import clicked_call, timeline_figure


@st.cache_resource(max_entries=16, show_spinner=False)
def _timeline(key: str, session_id: str, _rollout: Rollout) -> Timeline | None:
    return timeline(_rollout)


@st.cache_resource(max_entries=16, show_spinner=False)
def _figure(key: str, session_id: str, selected: int | None, _rollout: Rollout, _tl: Timeline) -> go.Figure:
    return timeline_figure(_rollout, _tl, selected)


def render(rollout: Rollout, workspace_key: str) -> None:
    """The timeline in an expander whose body runs only while it is open (a chart of thousands of
    bars is neither built nor sent while collapsed); it stays open across reruns once opened."""
    panel = st.expander("Timeline: calls over wall time", key=state.TIMELINE_OPEN, on_change="rerun")
    with panel:
        if not panel.open:
            return
        tl = _timeline(workspace_key, rollout.session_id, rollout)
        if tl is None:
            st.info(
                "This rollout records no call timing (started_at/ended_at, start_time/end_time, or a start and "
                "a latency), so there is no timeline to draw."
            )
            return
        n = len(rollout.calls)
        note = f"{n - len(tl.untimed)} of {n} calls over {tl.duration:.1f} s in {tl.n_lanes} lane(s)"
        if tl.untimed:
            note += f"; {len(tl.untimed)} without timing are not drawn"
        st.caption(
            note + ". Bars: start to end, by role (agent plain, auxiliary hatched, discarded calls cross-hatched);"
            " ticks: first token. Click a bar to open its call."
        )
        selected = state.current_node(rollout)
        event = st.plotly_chart(
            _figure(workspace_key, rollout.session_id, selected, rollout, tl),
            key=f"timeline-{workspace_key}-{rollout.session_id}-{selected}",
            on_select="rerun",
            selection_mode="points",
            width="stretch",
            config={"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]},
        )
        picked = clicked_call(event.selection.points if event else [])
        if picked is not None and picked != selected and 0 <= picked < n:
            state.select_node(rollout, picked)
            st.rerun()
