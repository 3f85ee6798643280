"""The detail pane before a call is selected: how to select one, and the calls worth a look as
buttons that select them.

Entry point: ``render(rollout)``; the calls are views/builders/start.py ``calls_worth_a_look``.

Where it sits: the right pane of the explorer's split view while nothing is selected."""

from __future__ import annotations

import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md
from rollout_graph.ui import state
from rollout_graph.ui.builders.start import calls_worth_a_look

HOW = (
    "**No call selected yet.** Click a node in the graph, pick one in the *Call* box below the timeline, or "
    "press **j** / **k** to step through the calls (**h** / **l**: parent and first child). The "
    "selected call is ringed in the graph and its detail opens here: header, parent and children, "
    "tokens, messages, training row, findings and the raw record."
)


def render(rollout: Rollout) -> None:
    st.markdown(HOW)
    starts = calls_worth_a_look(rollout)
    if not starts:
        return
    flagged = sum(1 for i in range(len(rollout.calls)) if rollout.findings_for(i))
    st.markdown(
        "**Worth a look**" + (f" · {flagged:,} call{'s' if flagged != 1 else ''} with findings" if flagged else "")
    )
    for k, start in enumerate(starts):
        st.button(
            md(start.label, 80),
            key=f"start-{rollout.session_id}-{k}-{start.index}",
            help=md(start.why, 300),
            on_click=state.select_node,
            args=(rollout, start.index),
            width="stretch",
        )
