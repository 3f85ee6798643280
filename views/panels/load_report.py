"""The load report: how many records of the open traces loaded, and for each skipped one its file,
line and reason, leading with the reasons (they are what a user must fix).

Entry point: ``render(workspace)``: a caption when everything loaded, else a warning naming the
first skipped records and an expander listing them (at most ``MAX_SKIPPED_ROWS``); before it, a
caption per engine the capture proxy's start-up probes found (rollout_graph.core.engine).

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


def engine_lines(workspace: Workspace) -> None:
    """What the capture proxy's start-up probes found of the engine (docs/live.md), one line each."""
    firsts = [r.calls[0] for r in list(workspace.rollouts.values())[:ENGINE_ROLLOUTS] if r.calls]
    for engine in engines(firsts)[:3]:
        st.caption(f"Engine (capture probe): {md(describe_engine(engine), 300)}")


def render(workspace: Workspace) -> None:
    engine_lines(workspace)
    loaded = workspace.loaded
    skipped = loaded.skipped
    if not skipped:
        st.caption(f"{md(workspace.label, 120)}: {loaded.records:,} records, all loaded")
        return
    # the reasons first: they are what a user must fix
    reasons = "; ".join(f"{md(Path(x.file).name, 60)}:{x.line}: {md(x.reason, 160)}" for x in skipped[:SHOWN_REASONS])
    more = f" (and {len(skipped) - SHOWN_REASONS:,} more below)" if len(skipped) > SHOWN_REASONS else ""
    rest = (
        "nothing else to load."
        if not loaded.loaded
        else f"the other {loaded.loaded:,} record{'s' if loaded.loaded != 1 else ''} loaded normally."
    )
    st.warning(
        f"**{len(skipped):,} skipped** of {loaded.records:,} records in {md(workspace.label, 120)}: {reasons}{more}. "
        f"{loaded.loaded:,} loaded: {rest}"
    )
    with st.expander(
        f"Load report: {len(skipped):,} skipped records (file, line, reason)", expanded=len(skipped) > SHOWN_REASONS
    ):
        rows = [{"file": Path(s.file).name, "line": s.line, "reason": s.reason} for s in skipped[:MAX_SKIPPED_ROWS]]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        if len(skipped) > MAX_SKIPPED_ROWS:
            st.caption(f"First {MAX_SKIPPED_ROWS:,} shown; `rollout-graph inspect --json` lists them all.")
