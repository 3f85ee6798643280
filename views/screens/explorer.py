"""The explorer page: choose traces, pick a rollout and a call; views/ renders each panel.

The first screen shows the picture: the headline numbers, then the DAG; everything else (guide,
findings, other rollouts, audit, downloads) is below it, collapsed unless it matters. Traces given
on the command line are followed as they grow: the part a new call changes reruns on its own
(views/live.py).
"""

import sys

import streamlit as st

from views import audit_view, graph_view, live, near_miss_view, node_view, overview, sidebar, state, tour
from views.sources import decoder

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
following = options.live  # command-line traces are followed as they grow (views/live.py)


def overview_and_graph(workspace):
    """Everything a new call changes; when following, this part reruns on its own."""
    if not workspace.rollouts:
        overview.load_report(workspace)
        st.info("Waiting for the first call…" if following else "No rollouts in this source.")
        return None
    session_id = state.current_session(list(workspace.rollouts), workspace.default_session)
    rollout = workspace.rollouts[session_id]

    st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.2rem}</style>")  # the DAG on the first screen
    overview.headline(rollout)
    overview.load_report(workspace)
    rewrites = near_miss_view.banner(rollout)
    if rewrites:
        st.warning(rewrites)
    newest = following.newest_index(rollout) if following else None
    graph_view.render(rollout, workspace.key, options.near_misses, newest)  # a click in the graph selects a call
    if following is None:
        tour.render(rollout, expanded=state.current_node(rollout) is None)
    overview.findings_panel(rollout)
    overview.rollouts_table(workspace, session_id)
    if following is None:
        audit_view.render(rollout, decoder(workspace.key, rollout.session_id, rollout, workspace.trace_paths))
    overview.downloads(rollout)
    return rollout


if following is not None:
    workspace, rollout = live.follow(following, overview_and_graph)
    if rollout is not None:
        tour.render(rollout, expanded=state.current_node(rollout) is None)
        audit_view.render(rollout, decoder(workspace.key, rollout.session_id, rollout, workspace.trace_paths))
elif workspace is not None:
    rollout = overview_and_graph(workspace)
else:
    rollout = None
if rollout is None:
    st.stop()

node = state.current_node(rollout)
if node is None:
    st.info("Click a node in the graph (or pick a call above) to see its tokens, messages and training row.")
else:
    # a live workspace's key changes with every new call; the call's widgets keep theirs
    key = following.key if following else workspace.key
    rollout_decoder = decoder(workspace.key, rollout.session_id, rollout, workspace.trace_paths)
    node_view.render(rollout, node, rollout_decoder, key, options.show_whitespace)
