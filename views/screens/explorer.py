"""The explorer page: choose traces, pick a rollout and a call; views/ renders each panel."""

import sys

import streamlit as st

from views import audit_view, graph_view, live, near_miss_view, node_view, overview, sidebar, state, tour
from views.sources import decoder

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
following = options.live  # command-line traces are followed as they grow (views/live.py)


def overview_and_graph(workspace):
    """Everything a new call changes; when following, this part reruns on its own."""
    overview.load_report(workspace)
    if not workspace.rollouts:
        st.info("Waiting for the first call…" if following else "No rollouts in this source.")
        return None
    session_id = state.current_session(list(workspace.rollouts), workspace.default_session)
    overview.rollouts_table(workspace, session_id)
    rollout = workspace.rollouts[session_id]

    overview.headline(rollout)
    overview.downloads(rollout)
    rewrites = near_miss_view.banner(rollout)
    if rewrites:
        st.warning(rewrites)
    overview.findings_panel(rollout)
    if following is None:
        audit_and_tour(workspace, rollout)
    newest = following.newest_index(rollout) if following else None
    graph_view.render(rollout, workspace.key, options.near_misses, newest)  # a click in the graph selects a call
    return rollout


def audit_and_tour(workspace, rollout):
    audit_view.render(rollout, decoder(workspace.key, rollout.session_id, rollout, workspace.trace_paths))
    tour.render(rollout, expanded=state.current_node(rollout) is None)


if following is not None:
    workspace, rollout = live.follow(following, overview_and_graph)
    if rollout is not None:
        audit_and_tour(workspace, rollout)
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
