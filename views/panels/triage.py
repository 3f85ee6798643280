"""Findings triage: one group per level and code, with its count and a one-line explanation,
expandable to its findings; a group's calls can be ringed in the DAG.

Entry points: ``render(rollout)``, ``ringed_calls(rollout)`` (the calls the DAG rings for the
chosen group), ``ringed_group``. Every finding row is a button, so clicking it opens its call
every time; the explanations are graph/reports/triage.py's.

Where it sits: below the split view in the explorer."""

from __future__ import annotations

import streamlit as st

from rollout_graph.core.records import FATAL, INFO, WARN
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import md_escape
from rollout_graph.reports.triage import FindingGroup, finding_groups
from rollout_graph.ui import state
from rollout_graph.ui.builders import mismatch
from rollout_graph.ui.state import signals as signals_state

MAX_ROWS = 60  # finding rows per group; the CLI's `inspect --json` lists them all
LEVEL_ICONS = {FATAL: "⛔", WARN: "⚠️", INFO: "ℹ️"}  # a glyph per level, so level is never colour alone
SEVERE_FIRST = "most severe first"
MILD_FIRST = "least severe first"


def _open(rollout: Rollout, index: int) -> None:
    state.select_node(rollout, index)


def _ring(group_id: tuple[str, str] | None) -> None:
    st.session_state[state.TRIAGE_GROUP] = group_id


def ringed_group(rollout: Rollout) -> tuple[str, str] | None:
    """The (session, level+code) group whose calls are ringed, if it belongs to this rollout."""
    chosen = st.session_state.get(state.TRIAGE_GROUP)
    return chosen if chosen and chosen[0] == rollout.session_id else None


def ringed_calls(rollout: Rollout) -> frozenset[int]:
    """The calls of the ringed findings group (empty when none is): known before the panel is drawn,
    so the DAG above it can ring them."""
    ringed = ringed_group(rollout)
    for group in finding_groups(rollout):
        if ringed == (rollout.session_id, f"{group.level}:{group.code}"):
            return frozenset(group.nodes)
    return frozenset()


def _group(rollout: Rollout, group: FindingGroup, ringed: tuple[str, str] | None) -> None:
    count = len(group.findings)
    title = (
        f"{LEVEL_ICONS.get(group.level, '')} **{group.level}** `{group.code}` ×{count} — {md_escape(group.explanation)}"
    )
    group_id = (rollout.session_id, f"{group.level}:{group.code}")
    # built only when opened (a group of a big rollout holds up to MAX_ROWS buttons): a deep link's
    # first page does not send or draw them below the fold
    panel = st.expander(title, key=f"triage-group-{rollout.session_id}-{group.level}-{group.code}", on_change="rerun")
    with panel:
        if not panel.open:
            return
        if group.nodes:
            on = ringed == group_id
            st.button(
                "Clear the rings in the graph" if on else f"Ring its {len(group.nodes)} call(s) in the graph",
                key=f"triage-ring-{rollout.session_id}-{group.level}-{group.code}",
                on_click=_ring,
                args=(None if on else group_id,),
                icon="⭕",
            )
        else:
            st.caption("About the rollout as a whole (no single call).")
        for k, f in enumerate(group.findings[:MAX_ROWS]):
            where = f.node_id or (f"sequence ending at {f.leaf_id}" if f.leaf_id else "the rollout")
            label = md_escape(f"{where}: {f.detail}")
            if f.node_id is None:
                st.caption(label)
                continue
            st.button(
                label,
                key=f"triage-row-{rollout.session_id}-{group.level}-{group.code}-{k}",
                on_click=_open,
                args=(rollout, rollout.index_of(f.node_id)),
                type="tertiary",
                help="Open this call",
            )
            if f.code == mismatch.MISMATCH:  # the finding points at its token
                signals_state.worst_token_button(rollout, rollout.index_of(f.node_id), f"triage-{k}")
        if count > MAX_ROWS:
            st.caption(f"First {MAX_ROWS} of {count} shown; `rollout-graph inspect --json` lists them all.")


def render(rollout: Rollout) -> frozenset[int]:
    """The triage panel; returns the calls of the ringed group (empty when none is)."""
    counts = rollout.finding_counts
    title = f"Findings: FATAL {counts[FATAL]} · WARN {counts[WARN]} · INFO {counts[INFO]}"
    ringed = ringed_group(rollout)
    groups = finding_groups(rollout)
    with st.expander(title, expanded=counts[FATAL] > 0 or ringed is not None):
        if not rollout.findings:
            st.caption("No findings.")
            return frozenset()
        order = st.segmented_control(
            "Order", [SEVERE_FIRST, MILD_FIRST], default=SEVERE_FIRST, key=f"triage-order-{rollout.session_id}"
        )
        if order == MILD_FIRST:
            groups = finding_groups(rollout, most_severe_first=False)
        st.caption("One group per code, with what it means; open a group for its findings, click one to open its call.")
        for group in groups:
            _group(rollout, group, ringed)
    for group in groups:
        if ringed == (rollout.session_id, f"{group.level}:{group.code}"):
            return frozenset(group.nodes)
    return frozenset()
