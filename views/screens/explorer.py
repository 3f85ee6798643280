"""The explorer page: choose traces, pick a rollout and a call; views/ renders each panel.

The first screen shows the picture: the headline numbers, the search box, then the DAG;
everything else (timeline, guide, findings triage, other rollouts, audit, downloads) is below it,
collapsed unless it matters. Traces given on the command line are followed as they grow: the part
a new call changes reruns on its own (views/state/live.py).
"""

import sys

import streamlit as st

from rollout_graph.ui import state
from rollout_graph.ui.panels import audit as audit_view
from rollout_graph.ui.panels import corrections as corrections_view
from rollout_graph.ui.panels import find as find_view
from rollout_graph.ui.panels import graph as graph_view
from rollout_graph.ui.panels import keyboard, overview, sidebar, tour
from rollout_graph.ui.panels import near_miss as near_miss_view
from rollout_graph.ui.panels import node as node_view
from rollout_graph.ui.panels import signals as signals_view
from rollout_graph.ui.panels import timeline as timeline_view
from rollout_graph.ui.panels import triage as triage_view
from rollout_graph.ui.state import live
from rollout_graph.ui.state import signals as signals_source
from rollout_graph.ui.state.sources import decoder

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
following = options.live  # command-line traces are followed as they grow (views/state/live.py)
drawn: dict = {}  # what the overview drew with: the workspace (signals joined) and its widget key


def overview_and_graph(workspace):
    """Everything a new call changes; when following, this part reruns on its own."""
    signals = signals_source.apply(workspace)  # training signals joined, when a signals file is chosen
    workspace = signals.workspace
    # the panels' widget keys follow the workspace drawn (signals joined): a search hit opens the token
    # view the call detail below draws with the same key
    view_key = workspace.key
    drawn.update(workspace=workspace, key=view_key)
    if not workspace.rollouts:
        overview.load_report(workspace)
        st.info("Waiting for the first call…" if following else "No rollouts in this source.")
        return None
    session_id = state.current_session(list(workspace.rollouts), workspace.default_session)
    rollout = workspace.rollouts[session_id]
    # keys and token clicks first: they move the selection every panel below reads
    keyboard.render(rollout, [state.search_key(view_key, session_id)], find_view.SEARCH_BOX_LABEL)

    st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.2rem}</style>")  # the DAG on the first screen
    overview.headline(rollout)
    overview.load_report(workspace)
    rewrites = near_miss_view.banner(rollout)
    if rewrites:
        st.warning(rewrites)
    rollout_decoder = decoder(workspace.key, session_id, rollout, workspace.trace_paths)
    hits = find_view.search_panel(rollout, rollout_decoder, view_key)
    dimmed = find_view.filter_panel(rollout, view_key)
    ringed = triage_view.ringed_calls(rollout)  # a findings group's calls, ringed in the DAG
    newest = following.newest_index(rollout) if following else None
    graph_view.render(rollout, workspace.key, options.near_misses, newest, dimmed, hits | ringed)
    timeline_view.render(rollout, view_key)  # a click selects a call too
    if following is None:
        tour.render(rollout, expanded=state.current_node(rollout) is None)
    triage_view.render(rollout)
    signals_view.render(rollout, signals)
    corrections_view.render(rollout, signals)  # the mismatch lens: docs/corrections.md
    overview.rollouts_table(workspace, session_id)
    if following is None:
        audit_view.render(rollout, rollout_decoder)
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
graph_view.bring_into_view()

node = state.current_node(rollout)
if node is None:
    st.info("Click a node in the graph (or pick a call above) to see its tokens, messages and training row.")
else:
    workspace = drawn.get("workspace", workspace)
    # a live workspace's key changes with every new call; the call's widgets keep the live source's
    key = following.key if following else drawn.get("key", workspace.key)
    rollout_decoder = decoder(workspace.key, rollout.session_id, rollout, workspace.trace_paths)
    node_view.render(rollout, node, rollout_decoder, key, options.show_whitespace)
