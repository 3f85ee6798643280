"""The downloads: the open rollout as training rows or trace entries (JSONL), built only when clicked.

Entry point: ``render(rollout, noted)``: two download buttons, and a checkbox that leaves out
unfinished attempts when the rollout has them (like ``export --drop-unfinished``); the training
rows apply the rollout's drop and mask notes (like ``export --notes``) and say so.

Where it sits: at the bottom of the explorer (views/screens/explorer.py); the rows are the
library's (graph/reports/export.py).
"""

from __future__ import annotations

import orjson
import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.reports import export, notes


def _jsonl(records: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def rows_bytes(rollout: Rollout, drop_unfinished: bool, noted: list[dict]) -> bytes:
    """The training rows as JSONL, with the notes' drop and mask actions applied (as
    ``rollout-graph export --notes`` applies them: rollout_graph.reports.notes.apply_notes)."""
    rows = export.iter_training_rows(rollout, export.ALL_ROLES, drop_unfinished)
    return _jsonl(list(notes.apply_notes(rollout, rows, noted)))


def render(rollout: Rollout, noted: list[dict] | None = None) -> None:
    """The open rollout as training rows or trace entries, generated only when clicked; ``noted``:
    the rollout's notes, whose drop and mask actions the training rows apply."""
    noted = noted or []
    acting = [n for n in noted if n.get("action") in ("drop", "mask")]
    left, right, drop_col = st.columns([1, 1, 3])
    name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in rollout.session_id)
    n_unfinished = rollout.stats["n_unfinished"]
    drop = n_unfinished > 0 and drop_col.checkbox(
        f"Leave out the {n_unfinished} unfinished attempts", key=f"drop-unfinished-{rollout.session_id}",
        help="sibling attempts none of which continued (the harness gave up on them): WARN unfinished_attempts",
    )  # fmt: skip
    applied = (
        f"; your {len(acting)} drop/mask note{'s' if len(acting) != 1 else ''} applied, as `export --notes` applies them"
        if acting
        else ""
    )
    left.download_button(
        "⬇ Training rows (JSONL)", data=lambda: rows_bytes(rollout, drop, noted),
        file_name=f"{name}.rows.jsonl", mime="application/jsonl", on_click="ignore",
        help="one labelled row per sequence, every role" + applied, width="stretch",
    )  # fmt: skip
    right.download_button(
        "⬇ Trace entries (JSONL)", data=lambda: _jsonl(export.trace_entries(rollout, drop_unfinished=drop)),
        file_name=f"{name}.trace-entries.jsonl", mime="application/jsonl", on_click="ignore",
        help="TRL/OpenEnv TraceEntry records for the agent's calls (notes are not applied to them)", width="stretch",
    )  # fmt: skip
    if acting:
        drops = sum(1 for n in acting if n["action"] == "drop")
        st.caption(
            f"The training rows apply your notes: {drops} drop, {len(acting) - drops} mask "
            "(the rows a drop note touches are left out; a mask note's tokens get loss mask 0). "
            "The trace entries are the calls as recorded."
        )
