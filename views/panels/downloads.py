"""The downloads: the open rollout as training rows or trace entries (JSONL), built only when clicked.

Entry point: ``render(rollout)``: two download buttons, and a checkbox that leaves out unfinished
attempts when the rollout has them (like ``export --drop-unfinished``).

Where it sits: at the bottom of the explorer (views/screens/explorer.py); the rows are the
library's (graph/reports/export.py).
"""

from __future__ import annotations

import orjson
import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.reports import export


def _jsonl(records: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def render(rollout: Rollout) -> None:
    """The open rollout as training rows or trace entries, generated only when clicked."""
    left, right, drop_col = st.columns([1, 1, 3])
    name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in rollout.session_id)
    n_unfinished = rollout.stats["n_unfinished"]
    drop = n_unfinished > 0 and drop_col.checkbox(
        f"Leave out the {n_unfinished} unfinished attempts", key=f"drop-unfinished-{rollout.session_id}",
        help="sibling attempts none of which continued (the harness gave up on them): WARN unfinished_attempts",
    )  # fmt: skip
    left.download_button(
        "⬇ Training rows (JSONL)", data=lambda: _jsonl(export.training_rows(rollout, drop_unfinished=drop)),
        file_name=f"{name}.rows.jsonl", mime="application/jsonl", on_click="ignore",
        help="one labelled row per sequence, every role", width="stretch",
    )  # fmt: skip
    right.download_button(
        "⬇ Trace entries (JSONL)", data=lambda: _jsonl(export.trace_entries(rollout, drop_unfinished=drop)),
        file_name=f"{name}.trace-entries.jsonl", mime="application/jsonl", on_click="ignore",
        help="TRL/OpenEnv TraceEntry records for the agent's calls", width="stretch",
    )  # fmt: skip
