"""Widget state that panels share.

Entry points: ``picked_row(frame, key, max_height)`` (a table whose row can be picked),
``jump_to(key, position)`` (turn a token view to a position and ring it), ``run_script(script,
key)`` (one of our own scripts, never trace text, run in the page).

Where it sits: under the panels that show tables and token views."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rollout_graph.ui.builders.tokens import page_of


def picked_row(frame: pd.DataFrame, key: str, max_height: int) -> int | None:
    """A table whose rows can be selected; the selected row's position, if any."""
    event = st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key=key,
        height=min(max_height, 38 + 35 * len(frame)),
    )
    rows = event.selection.rows
    return rows[0] if rows else None


def jump_to(key: str, position: int) -> None:
    """Open the page of ``position`` in the token view ``key`` with a ring on it (before it renders)."""
    st.session_state[f"{key}-page"] = page_of(position)
    st.session_state[f"{key}-mark"] = position


def run_script(script: str, key: str) -> None:
    """Run one of our own scripts (never trace text) in an iframe that takes no room on the page: a
    visible script frame is a blank block (about 150 px) that vanishes on the next rerun, so what
    sits above it in a scrolling pane moved when it went (the detail pane lost its ringed token)."""
    with st.container(key=key):  # hidden by the style inside it: no gap, no height
        st.html(f"<style>.st-key-{key}, [data-testid='stLayoutWrapper']:has(> .st-key-{key}){{display:none}}</style>")
        st.iframe(script, height=1)
