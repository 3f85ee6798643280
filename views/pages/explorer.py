"""The explorer page: choose traces, pick a rollout and a call; views/ renders each panel."""

import sys

import streamlit as st

from views import (
    audit_view,
    graph_view,
    near_miss_view,
    node_view,
    overview,
    sidebar,
    signals_source,
    signals_view,
    state,
    tour,
)
from views.sources import decoder

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
if workspace is None:
    st.stop()
signals = signals_source.apply(workspace)  # training signals joined, when a signals file is chosen
workspace = signals.workspace

overview.load_report(workspace)
if not workspace.rollouts:
    st.info("No rollouts in this source.")
    st.stop()

session_id = state.current_session(list(workspace.rollouts), workspace.default_session)
overview.rollouts_table(workspace, session_id)
rollout = workspace.rollouts[session_id]

overview.headline(rollout)
overview.downloads(rollout)
rewrites = near_miss_view.banner(rollout)
if rewrites:
    st.warning(rewrites)
overview.findings_panel(rollout)
signals_view.render(rollout, signals)
rollout_decoder = decoder(workspace.key, session_id, rollout, workspace.trace_paths)
audit_view.render(rollout, rollout_decoder)
tour.render(rollout, expanded=state.current_node(rollout) is None)
graph_view.render(rollout, workspace.key, options.near_misses)  # a click in the graph selects a call

node = state.current_node(rollout)
if node is None:
    st.info("Click a node in the graph (or pick a call above) to see its tokens, messages and training row.")
else:
    node_view.render(rollout, node, rollout_decoder, workspace.key, options.show_whitespace)
