"""The Raw JSON tab: the record exactly as it stands in its file (read back by file and line), and,
separately, the fields the loader derived from it.

Entry point: ``render(call, workspace_key, sources)``.

Where it sits: in the detail's Raw JSON tab (views/screens/explorer.py ``call_detail``)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from rollout_graph.core.records import Call
from rollout_graph.escape import md
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.values.record_text import read_record
from rollout_graph.ui.builders.chat import raw_record

MAX_SHOWN = 200_000  # characters drawn; the download has the whole record


@st.cache_data(max_entries=64, show_spinner=False)
def _read(workspace_key: str, name: str, line: int, _source: Source) -> tuple[str, bool, str] | str:
    try:
        record = read_record(_source, line)
    except (LookupError, OSError) as exc:
        return f"Cannot read the record back: {exc}"
    return record.text, record.exact, record.where


def render(call: Call, workspace_key: str, sources: dict[str, Source]) -> None:
    """``sources``: the drawn workspace's sources by name (a file's path or an upload's name)."""
    name = Path(call.source).name  # never a server path
    source = sources.get(call.source)
    found = (
        _read(workspace_key, call.source, call.line, source)
        if source is not None
        else f"{name} is not among the files this page read; reopen the source to read its record."
    )
    if isinstance(found, str):
        st.warning(found)
    else:
        text, exact, where = found
        how = "exactly as it stands in the file" if exact else "re-serialised (not byte for byte)"
        st.caption(f"The record from **{md(name)}**, {md(where)}: {how}. {len(text):,} characters.")
        shown = text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN]
        st.code(shown, language="json", wrap_lines=True, height=420)
        if len(text) > MAX_SHOWN:
            st.caption(f"First {MAX_SHOWN:,} characters shown; the download has all of it.")
        st.download_button(
            "⬇ This record", data=text, file_name=f"{call.node_id}.json", mime="application/json", on_click="ignore"
        )
    with st.expander("Derived fields: what the loader read from the record"):
        st.json(raw_record(call), expanded=2)
