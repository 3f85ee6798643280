"""The Compare page: two rollouts side by side.

A page script: the sidebar (views/panels/sidebar.py) chooses the traces, signals are joined
(views/state/signals.py), and views/panels/compare.py draws the comparison."""

import sys

import streamlit as st

from rollout_graph.ui.panels import compare as compare_view
from rollout_graph.ui.panels import sidebar
from rollout_graph.ui.state import signals as signals_source

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
if workspace is None and options.live is not None:  # command-line traces: their current snapshot
    workspace = options.live.workspace()
if workspace is None:
    st.stop()
workspace = signals_source.apply(workspace).workspace
compare_view.render(workspace, options.show_whitespace, options.near_misses)
