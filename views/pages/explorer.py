"""The explorer page: choose traces, pick a rollout and a call; views/ renders each panel."""

import sys

import streamlit as st

from views import (
    audit_view,
    find_view,
    graph_view,
    keyboard,
    near_miss_view,
    node_view,
    overview,
    sidebar,
    state,
    timeline_view,
    tour,
    triage_view,
)
from views.sources import decoder

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
if workspace is None:
    st.stop()

overview.load_report(workspace)
if not workspace.rollouts:
    st.info("No rollouts in this source.")
    st.stop()

session_id = state.current_session(list(workspace.rollouts), workspace.default_session)
overview.rollouts_table(workspace, session_id)
rollout = workspace.rollouts[session_id]
# keys and token clicks first: they move the selection every panel below reads
keyboard.render(rollout, [state.search_key(workspace.key, session_id)], find_view.SEARCH_BOX_LABEL)

overview.headline(rollout)
overview.downloads(rollout)
rewrites = near_miss_view.banner(rollout)
if rewrites:
    st.warning(rewrites)
ringed = triage_view.render(rollout)  # a findings group's calls, ringed in the DAG
rollout_decoder = decoder(workspace.key, session_id, rollout, workspace.trace_paths)
audit_view.render(rollout, rollout_decoder)
tour.render(rollout, expanded=state.current_node(rollout) is None)
hits = find_view.search_panel(rollout, rollout_decoder, workspace.key)
dimmed = find_view.filter_panel(rollout, workspace.key)
graph_view.render(rollout, workspace.key, options.near_misses, dimmed, hits | ringed)  # a click selects a call
timeline_view.render(rollout, workspace.key)  # a click selects a call too

node = state.current_node(rollout)
if node is None:
    st.info("Click a node in the graph (or pick a call above) to see its tokens, messages and training row.")
else:
    node_view.render(rollout, node, rollout_decoder, workspace.key, options.show_whitespace)
