"""The explorer page: choose traces, pick a rollout and a call; views/ renders each panel.

The first screen shows the picture: the headline numbers, then the DAG; everything else (guide,
findings, other rollouts, audit, downloads) is below it, collapsed unless it matters.
"""

import sys

import streamlit as st

from views import audit_view, graph_view, near_miss_view, node_view, overview, sidebar, state, tour
from views.sources import decoder

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
if workspace is None:
    st.stop()

if not workspace.rollouts:
    overview.load_report(workspace)
    st.info("No rollouts in this source.")
    st.stop()

session_id = state.current_session(list(workspace.rollouts), workspace.default_session)
rollout = workspace.rollouts[session_id]

st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.2rem}</style>")  # the DAG on the first screen
overview.headline(rollout)
overview.load_report(workspace)
rewrites = near_miss_view.banner(rollout)
if rewrites:
    st.warning(rewrites)
graph_view.render(rollout, workspace.key, options.near_misses)  # a click in the graph selects a call
tour.render(rollout, expanded=state.current_node(rollout) is None)
overview.findings_panel(rollout)
overview.rollouts_table(workspace, session_id)
rollout_decoder = decoder(workspace.key, session_id, rollout, workspace.trace_paths)
audit_view.render(rollout, rollout_decoder)
overview.downloads(rollout)

node = state.current_node(rollout)
if node is None:
    st.info("Click a node in the graph (or pick a call above) to see its tokens, messages and training row.")
else:
    node_view.render(rollout, node, rollout_decoder, workspace.key, options.show_whitespace)
