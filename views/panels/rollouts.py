"""The Rollouts table: one row per session of the open traces; selecting a row opens it.

Entry point: ``render(workspace, current)`` (nothing for a single rollout): calls, roots, forks,
discarded, trainable tokens (rows), FATAL and WARN per session, grouped when the visitor groups
them (views/state/groups.py).

Where it sits: below the split view in the explorer (views/screens/explorer.py).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rollout_graph.core.records import FATAL, WARN
from rollout_graph.ui import state
from rollout_graph.ui.state import groups as groups_view
from rollout_graph.ui.state.sources import Workspace
from rollout_graph.ui.state.widgets import picked_row


def with_dashes(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with "—" for every missing value (the guide's promise), a column that lacks one
    shown as text (a column of numbers and dashes is not a number column)."""
    out = frame.copy()
    for column in out.columns:
        if out[column].isna().any():
            out[column] = ["—" if pd.isna(v) else f"{v:.4g}" if isinstance(v, float) else str(v) for v in out[column]]
    return out


def render(workspace: Workspace, current: str) -> None:
    """One row per session; selecting a row opens it."""
    ids = list(workspace.rollouts)
    if len(ids) < 2:
        return
    st.markdown("##### Rollouts")
    by_group = groups_view.group_by_toggle()
    ids = groups_view.ordered(workspace, ids, by_group)
    rows = []
    for sid in ids:
        r = workspace.rollouts[sid]
        s, counts = r.stats, r.finding_counts
        rows.append(
            {
                "session": sid,
                "calls": s["n_calls"],
                "roots": s["n_roots"],
                "forks": s["n_forks"],
                "discarded": s["n_discarded"],
                "trainable tokens (rows)": s["n_trainable_tokens"],
                "FATAL": counts[FATAL],
                "WARN": counts[WARN],
                **groups_view.extra_columns(workspace, sid, by_group),
                "open": "▶" if sid == current else "",
            }
        )
    frame = with_dashes(pd.DataFrame(rows))  # a value a rollout lacks reads "—", never None
    picked = picked_row(frame, f"rollouts-{workspace.key}-{by_group}", max_height=400)
    if state.new_pick(f"rollouts-{workspace.key}", ids[picked] if picked is not None else None) and picked is not None:
        state.select_session(ids[picked])
        st.rerun()
