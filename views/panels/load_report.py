"""The load report: how many records of the open traces loaded, and for each skipped one its file,
line and reason, leading with the reasons (they are what a user must fix).

Entry point: ``render(workspace, growing)``: a caption when everything loaded, else a warning naming the
first skipped records and an expander listing them (at most ``MAX_SKIPPED_ROWS``); the engine the
capture proxy's start-up probes found (rollout_graph.core.engine) in a popover beside the caption,
or a caption of its own above the warning.

Where it sits: at the top of the explorer (views/screens/explorer.py), under the headline; the
records were counted by the load (graph/ingest, ``Workspace.loaded``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from rollout_graph.core.engine import describe as describe_engine
from rollout_graph.core.engine import engines
from rollout_graph.escape import md
from rollout_graph.ui.state.sources import Workspace

MAX_SKIPPED_ROWS = 1000


SHOWN_REASONS = 3  # skipped records named in the warning itself
ENGINE_ROLLOUTS = 200  # rollouts whose first call is read for the capture probe's engine line


def engine_lines(workspace: Workspace) -> list[str]:
    """What the capture proxy's start-up probes found of the engine (docs/live.md), one line each
    (Markdown, escaped)."""
    firsts = [r.calls[0] for r in list(workspace.rollouts.values())[:ENGINE_ROLLOUTS] if r.calls]
    return [f"Engine (capture probe): {md(describe_engine(engine), 300)}" for engine in engines(firsts)[:3]]


def render(workspace: Workspace, growing: bool = False) -> None:
    """The load report. ``growing``: the traces are followed as they are written, where a last line
    without its newline yet is normal (the live status line names it); anywhere else such a line is a
    record cut short, and it says so."""
    engines_found = engine_lines(workspace)
    loaded = workspace.loaded
    skipped = loaded.skipped
    cut = [] if growing else list(loaded.pending)
    if not skipped and not cut:
        # one line: the first screen keeps its room for the graph; the engine's probe behind a button
        row = st.container(horizontal=True, vertical_alignment="center", gap="small")
        row.caption(f"{md(workspace.label, 120)}: {loaded.records:,} records, all loaded", width="content")
        if engines_found:
            with row.popover(
                "Engine (capture probe)", type="tertiary", help="What the capture proxy found of the engine"
            ):
                for line in engines_found:
                    st.caption(line)
        return
    for line in engines_found:
        st.caption(line)
    if not skipped:
        names = "; ".join(f"{md(Path(x.file).name, 60)}:{x.line}" for x in cut[:SHOWN_REASONS])
        st.warning(
            f"**The last line is cut mid-record** ({names}): it has no newline and does not parse, so it is "
            f"not loaded. The other {loaded.loaded:,} record{'s' if loaded.loaded != 1 else ''} loaded normally "
            "(`rollout-graph inspect` reports the same line as pending)."
        )
        return
    # the reasons first: they are what a user must fix
    reasons = "; ".join(f"{md(Path(x.file).name, 60)}:{x.line}: {md(x.reason, 160)}" for x in skipped[:SHOWN_REASONS])
    more = f" (and {len(skipped) - SHOWN_REASONS:,} more below)" if len(skipped) > SHOWN_REASONS else ""
    rest = (
        "nothing else to load."
        if not loaded.loaded
        else f"the other {loaded.loaded:,} record{'s' if loaded.loaded != 1 else ''} loaded normally."
    )
    tail = f" The last line of {md(Path(cut[0].file).name, 60)} is cut mid-record and not loaded." if cut else ""
    st.warning(
        f"**{len(skipped):,} skipped** of {loaded.records:,} records in {md(workspace.label, 120)}: {reasons}{more}. "
        f"{loaded.loaded:,} loaded: {rest}{tail}"
    )
    with st.expander(
        f"Load report: {len(skipped):,} skipped records (file, line, reason)", expanded=len(skipped) > SHOWN_REASONS
    ):
        rows = [{"file": Path(s.file).name, "line": s.line, "reason": s.reason} for s in skipped[:MAX_SKIPPED_ROWS]]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        if len(skipped) > MAX_SKIPPED_ROWS:
            st.caption(f"First {MAX_SKIPPED_ROWS:,} shown; `rollout-graph inspect --json` lists them all.")
