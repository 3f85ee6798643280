"""Share a rollout: "Download this view as HTML", the same self-contained file as
``rollout-graph bundle`` for the open rollout and call.

Entry points: ``render(rollout, workspace, decoder)`` and ``page(...)`` (the file, built only when
asked; rollout_graph.reports.bundle).

Where it sits: at the bottom of the explorer."""

from __future__ import annotations

import streamlit as st

from rollout_graph.analysis.decode import Decoder
from rollout_graph.core.rollout import Rollout
from rollout_graph.reports.bundle import BundleOptions, bundle_html
from rollout_graph.ui import state
from rollout_graph.ui.state import notes as notes_state
from rollout_graph.ui.state.sources import Workspace

LABEL = "⬇ Download this view as HTML"


def page(rollout: Rollout, decoder: Decoder, workspace: Workspace, node: int | None) -> str:
    """The bundle of the open rollout, opening at ``node`` (its notes shown)."""
    options = BundleOptions(
        node=None if node is None else rollout.calls[node].node_id,
        paths=[str(p) for p in workspace.trace_paths],
        notes=notes_state.store(workspace).for_session(rollout.session_id),
    )
    return bundle_html([rollout], [decoder], options)


def render(rollout: Rollout, workspace: Workspace, decoder: Decoder) -> None:
    """The download button, built only when clicked."""
    node = state.current_node(rollout)
    name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in rollout.session_id)
    at = "" if node is None else f", opening at {rollout.calls[node].node_id}"
    st.download_button(
        LABEL,
        data=lambda: page(rollout, decoder, workspace, node),
        file_name=f"{name}.html",
        mime="text/html",
        on_click="ignore",
        help="One self-contained HTML file of this rollout (the graph, each call's tokens, the training rows, "
        f"the notes{at}): it opens from disk anywhere, with no server and no network. "
        "The command line writes the same file: rollout-graph bundle.",
        key=f"share-{workspace.key}-{rollout.session_id}",
    )
