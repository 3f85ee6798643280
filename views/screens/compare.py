"""The Compare page: two rollouts side by side (views/compare_view.py)."""

import sys

import streamlit as st

from views import compare_view, sidebar, signals_source

workspace, options = sidebar.render(cli_directories=sys.argv[1:])
if workspace is None:
    st.stop()
workspace = signals_source.apply(workspace).workspace
compare_view.render(workspace, options.show_whitespace)
