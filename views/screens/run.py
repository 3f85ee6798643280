"""The Run page: a training run step by step; a rollout opens in the explorer.

A page script: views/panels/run.py draws the run; ``open_rollout`` (the table's callback) points
the explorer at one command-line file and session and switches page."""

import sys
from pathlib import Path

import streamlit as st

from rollout_graph.ui import state
from rollout_graph.ui.panels import run, sidebar
from rollout_graph.ui.state.sources import files_under


def open_rollout(file: str, session_id: str) -> str | None:
    """Point the explorer at one command-line file and session (the table's callback); None when done."""
    cli = {p.resolve(): p for p in files_under(sys.argv[1:])}
    target = Path(file).resolve()
    if target not in cli:
        return f"{Path(file).name} is not among the command-line folders' trace files."
    state.choose_source(sidebar.COMMAND_LINE)
    st.session_state[state.CLI_FILE] = cli[target]
    state.select_session(session_id)
    st.session_state[state.GOTO_EXPLORER] = True
    return None


if st.session_state.pop(state.GOTO_EXPLORER, False) and state.PAGES in st.session_state:
    st.switch_page(st.session_state[state.PAGES]["explorer"])
run.render(sys.argv[1:], open_rollout)
