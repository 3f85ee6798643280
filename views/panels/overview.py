"""The overview: load report, rollouts table, the open rollout's headline numbers and findings."""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd
import streamlit as st

from rollout_graph.core.engine import describe as describe_engine
from rollout_graph.core.engine import engines
from rollout_graph.core.records import FATAL, WARN
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text, md
from rollout_graph.reports import export
from rollout_graph.ui import state
from rollout_graph.ui.state import groups as groups_view
from rollout_graph.ui.state.sources import Workspace
from rollout_graph.ui.state.widgets import picked_row

MAX_SKIPPED_ROWS = 1000


SHOWN_REASONS = 3  # skipped records named in the warning itself


ENGINE_ROLLOUTS = 200  # rollouts whose first call is read for the capture probe's engine line


def engine_report(workspace: Workspace) -> None:
    """What the capture proxy's start-up probes found of the engine (docs/live.md), one line each."""
    firsts = [r.calls[0] for r in list(workspace.rollouts.values())[:ENGINE_ROLLOUTS] if r.calls]
    for engine in engines(firsts)[:3]:
        st.caption(f"Engine (capture probe): {md(describe_engine(engine), 300)}")


def load_report(workspace: Workspace) -> None:
    engine_report(workspace)
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


def rollouts_table(workspace: Workspace, current: str) -> None:
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
    picked = picked_row(pd.DataFrame(rows), f"rollouts-{workspace.key}-{by_group}", max_height=400)
    if state.new_pick(f"rollouts-{workspace.key}", ids[picked] if picked is not None else None) and picked is not None:
        state.select_session(ids[picked])
        st.rerun()


def compact(n: int) -> str:
    """1,234 / 12.3k / 1.89M: numbers that fit a metric tile."""
    if n < 10_000:
        return f"{n:,}"
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.2f}M"


def headline(rollout: Rollout) -> None:
    shapes = ", ".join(sorted({c.shape for c in rollout.calls}))
    st.html(
        f'<div style="font-weight:600;font-size:22px;color:#0f172a;margin-top:8px">Rollout {html_text(rollout.session_id)}'
        f'<span style="font-weight:400;font-size:13px;color:#64748b;margin-left:10px">{html_text(shapes)}</span></div>'
    )
    tiles = headline_tiles(rollout)
    # a tile's label wraps instead of ending in "…" ("trainable tokens (rows)" at 1440 px wide)
    st.html(
        "<style>[data-testid='stMetricLabel'] *{white-space:normal!important;overflow:visible!important;"
        "text-overflow:clip!important}</style>"
    )
    for col, (label, value, why) in zip(st.columns(len(tiles)), tiles, strict=True):
        col.metric(label, value, help=why)


def headline_tiles(rollout: Rollout) -> list[tuple[str, str | int, str | None]]:
    """(label, value, help) per headline tile: retries the harness made are counted apart from
    replays of the model's own reply that broke the token prefix (pure)."""
    s, counts = rollout.stats, rollout.finding_counts
    return [
        ("calls", s["n_calls"], None),
        ("roots", s["n_roots"], None),
        ("forks", s["n_forks"], None),
        ("retries", s["n_discarded_retries"], "discarded calls the harness re-sent with the same prompt"),
        ("broken replays", s["n_broken_replays"],
         "the model's own reply replayed so that the token prefix broke (edited or re-tokenized): "
         "a new root or a call that only looks discarded"),
        ("trainable tokens (rows)", compact(s["n_trainable_tokens"]),
         "loss-mask-1 tokens summed over the training rows (a call in several rows counts in each; "
         f"{s['n_trainable_tokens_in_discarded_rows']:,} of them in discarded rows). Each call once: "
         f"{s['n_trainable_call_tokens']:,} trainable tokens (calls), the Audit panel's count"),
        ("FATAL · WARN", f"{counts[FATAL]} · {counts[WARN]}", "findings by level (the findings panel lists every code)"),
    ]  # fmt: skip


def _jsonl(records: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def downloads(rollout: Rollout) -> None:
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
