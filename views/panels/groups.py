"""The groups panel under the Rollouts table: each group's members, rewards and where their main
rows diverge.

Entry point: ``render(workspace)`` (only when the table is grouped; the groups themselves are
views/state/groups.py)."""

from __future__ import annotations

import streamlit as st

from rollout_graph.ui import state
from rollout_graph.ui.state.groups import groups_frame
from rollout_graph.ui.state.sources import Workspace


def render(workspace: Workspace) -> None:
    """The groups under the rollouts table (shown when grouping is on)."""
    if len(workspace.rollouts) < 2 or not st.session_state.get(state.GROUP_BY):
        return
    frame = groups_frame(workspace)
    if frame.empty:
        return
    st.caption(
        "Groups: rollouts with the same first agent prompt. 'main sequences shared' is the common token prefix of "
        "all members' main agent rows: where they start to differ."
    )
    st.dataframe(frame, hide_index=True, width="stretch")
