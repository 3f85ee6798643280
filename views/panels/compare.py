"""The Compare page's panel: two rollouts' stats, findings and signals side by side with the
differences highlighted, both DAGs, and the two main rows aligned at their first divergence.

Entry point: ``render(workspace, show_whitespace)``; ``stats_html``, ``findings_html``,
``signals_html`` and ``divergence_text`` build its pure parts.

Where it sits: drawn by views/screens/compare.py; the comparison is graph/reports/compare.py (the
same as ``rollout-graph compare --json``)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.story import main_row
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import LEVELS
from rollout_graph.escape import html_text, md
from rollout_graph.reports.compare import compare
from rollout_graph.ui import state
from rollout_graph.ui.builders.dag import dag_figure
from rollout_graph.ui.builders.tokens import page_html, sequence_strip
from rollout_graph.ui.state.sources import Workspace, decoder

CONTEXT_BEFORE = 48  # common-prefix tokens shown before the divergence
SHOWN_AFTER = 240  # tokens of each side shown after it
DIFF_STYLE = "background:#fef3c7"
SIGNAL_KEYS = {
    "reward": ".3g", "n_tokens": ",", "mean_abs_diff": ".3g", "max_abs_diff": ".3g", "kl_k3": ".2g",
    "ratio_outside_share": ".2%", "mean_advantage": ".3g", "n_mismatch_calls": ",", "n_rows": ",",
    "n_rows_ignored": ",",
}  # fmt: skip


def _cell(value: Any, spec: str = ",") -> str:
    if value is None:
        return "—"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return html_text(str(value))


def _table(title: str, rows: list[tuple[str, Any, Any, str]], a_name: str, b_name: str) -> str:
    """An HTML table of (label, A, B, format) rows; rows whose values differ are highlighted."""
    head = (
        f'<tr><th style="text-align:left">{html_text(title)}</th><th style="text-align:right">A · {html_text(a_name)}</th>'
        f'<th style="text-align:right">B · {html_text(b_name)}</th></tr>'
    )
    body = []
    for label, a, b, spec in rows:
        style = f' style="{DIFF_STYLE}"' if a != b else ""
        mark = " ≠" if a != b else ""
        body.append(
            # the label never wraps (a mark alone on a second line read as a stray row)
            f'<tr class="rg-cmp-row{" rg-cmp-diff" if a != b else ""}"{style}>'
            f'<td style="white-space:nowrap">{html_text(label)}{mark}</td>'
            f'<td style="text-align:right">{_cell(a, spec)}</td><td style="text-align:right">{_cell(b, spec)}</td></tr>'
        )
    return (
        '<table class="rg-cmp" style="border-collapse:collapse;width:100%;font:13px system-ui,sans-serif">'
        f"{head}{''.join(body)}</table>"
        "<style>.rg-cmp td,.rg-cmp th{padding:3px 8px;border-bottom:1px solid #e2e8f0}</style>"
    )


def stats_html(result: dict[str, Any]) -> str:
    """Stats (exactly what inspect reports) and finding counts side by side."""
    a, b = result["a"], result["b"]
    rows = [(k, a["stats"][k], b["stats"].get(k), ",") for k in a["stats"]]
    rows += [(level, a["finding_counts"][level], b["finding_counts"][level], ",") for level in LEVELS]
    return _table("stat", rows, a["session_id"], b["session_id"])


def findings_html(result: dict[str, Any]) -> str:
    """Findings by code side by side."""
    a, b = result["a"], result["b"]
    codes = sorted(set(a["finding_codes"]) | set(b["finding_codes"]))
    rows = [(c, a["finding_codes"].get(c, 0), b["finding_codes"].get(c, 0), ",") for c in codes]
    return _table("finding code", rows, a["session_id"], b["session_id"])


def signals_html(result: dict[str, Any]) -> str | None:
    """Rewards and signals side by side, when either side has them."""
    a, b = result["a"].get("signals"), result["b"].get("signals")
    if a is None and b is None:
        return None
    rows = [(k, (a or {}).get(k), (b or {}).get(k), spec) for k, spec in SIGNAL_KEYS.items()]
    return _table("signals", rows, result["a"]["session_id"], result["b"]["session_id"])


def divergence_text(result: dict[str, Any]) -> str:
    """One sentence on the main sequences: identical, or where and how they part."""
    m = result["main"]
    same = (
        "The same first agent prompt (one GRPO group)."
        if result["differences"]["same_first_prompt"]
        else "Different first agent prompts."
    )
    if m["identical"]:
        return f"{same} The main sequences are identical ({m['a_tokens']:,} tokens)."
    return (
        f"{same} The main sequences share their first {m['common_prefix_tokens']:,} tokens, then part "
        f"(A {m['a_tokens']:,} tokens, B {m['b_tokens']:,})."
    )


def _aligned(rollout: Rollout, dec: Decoder, shared: int, show_whitespace: bool) -> tuple[str, str]:
    row = main_row(rollout)
    if row is None:
        return "", ""
    strip = sequence_strip(rollout, row)
    before = page_html(strip, max(0, shared - CONTEXT_BEFORE), shared, dec, show_whitespace)
    after = page_html(strip, shared, min(len(strip), shared + SHOWN_AFTER), dec, show_whitespace, mark=shared)
    return before, after


def _pick(label: str, ids: list[str], key: str, default: str) -> str:
    if st.session_state.get(key) not in ids:
        st.session_state[key] = default
    return st.selectbox(label, ids, key=key)


def _default_b(workspace: Workspace, a: str) -> str:
    """Another rollout, preferring one with the same first agent prompt."""
    from rollout_graph.ui.state.groups import groups

    for group in groups(workspace):
        if a in group.members and len(group.members) > 1:
            return next(s for s in group.members if s != a)
    return next((s for s in workspace.rollouts if s != a), a)


def render(workspace: Workspace, show_whitespace: bool, near_misses: bool = True) -> None:
    """The whole Compare page below the sidebar."""
    ids = list(workspace.rollouts)
    if not ids:
        st.info("No rollouts in this source.")
        return
    st.markdown("##### Compare two rollouts")
    if len(ids) < 2:  # a rollout beside itself: every row equal, which reads as a finding
        st.info(
            f"These traces hold one rollout ({md(ids[0])}): Compare needs two. Open a folder or files "
            "with more rollouts (the sidebar's source), or see this one in the Explorer."
        )
        return
    left, right = st.columns(2)
    with left:
        a_id = _pick("Rollout A", ids, state.COMPARE_A, workspace.default_session)
    with right:
        b_id = _pick("Rollout B", ids, state.COMPARE_B, _default_b(workspace, a_id))
    a, b = workspace.rollouts[a_id], workspace.rollouts[b_id]
    result = compare(a, b)
    st.html(
        f'<div class="rg-cmp-summary" style="font:14px system-ui;color:#0f172a;margin:4px 0 8px">'
        f"{html_text(divergence_text(result))} Differences are highlighted.</div>"
    )
    left, right = st.columns(2)
    left.html(stats_html(result))
    right.html(findings_html(result))
    signals = signals_html(result)
    if signals is not None:
        st.html(signals)
    left, right = st.columns(2)
    for col, name, rollout in ((left, "A", a), (right, "B", b)):
        col.markdown(f"**{name} · {md(rollout.session_id)}**")
        col.plotly_chart(
            # laid out as the explorer lays it out (the sidebar's near-miss toggle: roots after the call they nearly continued)
            dag_figure(rollout, near_misses=near_misses), key=f"cmp-dag-{name}-{workspace.key}-{rollout.session_id}", width="stretch",
            config={"displaylogo": False, "scrollZoom": True},
        )  # fmt: skip
    if not a.sequences or not b.sequences:
        st.caption("One side has no training sequence to align.")
        return
    shared = result["main"]["common_prefix_tokens"]
    dec_a = decoder(workspace.key, a.session_id, a, workspace.trace_paths)
    dec_b = decoder(workspace.key, b.session_id, b, workspace.trace_paths)
    st.markdown("##### Main sequences, aligned at their first divergence")
    if result["main"]["identical"]:
        st.caption("Identical: nothing to align.")
        return
    before, after_a = _aligned(a, dec_a, shared, show_whitespace)
    _, after_b = _aligned(b, dec_b, shared, show_whitespace)
    st.caption(
        f"The last {min(shared, CONTEXT_BEFORE)} shared tokens (of {shared:,}), then each side's next "
        f"{SHOWN_AFTER} tokens; the ringed token is the first that differs. Sampled tokens coloured by logprob "
        "(hover for both logprobs when signals are loaded)."
    )
    st.html(f'<div class="rg-cmp-shared">{before}</div>')
    left, right = st.columns(2)
    left.markdown(f"**A · {md(a.session_id)}** (main row {md(result['main']['a_leaf_id'])})")
    left.html(f'<div class="rg-cmp-a">{after_a}</div>')
    right.markdown(f"**B · {md(b.session_id)}** (main row {md(result['main']['b_leaf_id'])})")
    right.html(f'<div class="rg-cmp-b">{after_b}</div>')
