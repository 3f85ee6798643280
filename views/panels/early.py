"""A deep link into a trace the server is still reading: the linked call's detail first.

Entry points: ``linked_call(files)`` (the call the URL's ``file`` and ``line`` name, read from its
line by ``rollout_graph.ingest.load.calls_at_line``) and ``render(found, split, height, show_whitespace)``
(its header and sampled tokens, with a note that the rest is being read).

Where it sits: drawn first by views/screens/explorer.py, replaced by the whole page when the read ends."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from rollout_graph.analysis.decode import decoder_for
from rollout_graph.core.records import Call
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.calls_at_line import find_call, read_calls_at
from rollout_graph.ui import state
from rollout_graph.ui.builders import early
from rollout_graph.ui.builders.chat import chat_html
from rollout_graph.ui.builders.tokens import PAGE_SIZE, page_html


def linked_call(files: list[Path]) -> tuple[Call, Path, str, int] | None:
    """The call the URL names, read from the file and line the link carries, when that file is one
    of ``files`` (the command-line traces: a link never opens any other path) and that line holds
    the call; None otherwise (an older link, a stale line: the page then waits for the whole read)."""
    session, node = st.query_params.get("session"), st.query_params.get("node")
    at = state.link_location()
    if not session or not node or at is None:
        return None
    file, line = at
    path = next((f for f in files if state.link_file(str(f)) == file), None)
    if path is None:
        return None
    call = find_call(read_calls_at(Source.from_path(path), line), session, node)
    return None if call is None else (call, path, file, line)


def render(found: tuple[Call, Path, str, int], split: list[int], height: int, show_whitespace: bool) -> None:
    """The call's header, the note, its sampled tokens (first page) and its messages, in the split
    view's detail pane (so the page keeps its place when the graph arrives beside it)."""
    call, path, file, line = found
    try:
        size = path.stat().st_size
    except OSError:
        size = None
    graph_pane, detail_pane = st.columns(split, gap="medium")
    graph_pane.html(early.note_html(size))
    with detail_pane.container(height=height, border=False):
        st.html(early.header_html(call, file, line))
        decoder = decoder_for([call], [path])
        strip = early.sampled_strip(call)
        if len(strip):
            shown = min(len(strip), PAGE_SIZE)
            st.caption(
                f"Sampled tokens {0:,}–{shown - 1:,} of {len(strip):,}, coloured by their logprob (darker: less "
                "likely). The context span and whether they are trained are known once the graph is read."
            )
            st.html(page_html(strip, 0, shown, decoder, show_whitespace))
        else:
            st.caption("No sampled tokens in this record.")
        st.markdown("**Messages**")
        st.html(chat_html(call))
    # then the chart code, while the rest of the trace is read (the DAG needs it once the read ends)
    with st.container(key="rg-early-warm"):
        st.html(
            "<style>.st-key-rg-early-warm,"
            " [data-testid='stLayoutWrapper']:has(> .st-key-rg-early-warm){display:none}</style>"
        )
        st.plotly_chart(go.Figure(layout={"height": 10}), config={"staticPlot": True}, key="rg-early-warm-plot")
