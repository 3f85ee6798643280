"""The training-signals panel: the open rollout's trainer-vs-inference figures, its joined rows,
and a scatter of inference vs trainer logprob per token whose points open their token.

Entry points: ``render(rollout, joined)``; ``points``, ``rows_frame`` and ``scatter_caption``
(pure parts; the scatter itself is views/builders/mismatch/).

Where it sits: below the split view in the explorer, when signals are joined (views/state/signals.py)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text
from rollout_graph.ui import state
from rollout_graph.ui.builders import mismatch
from rollout_graph.ui.builders.mismatch import Points
from rollout_graph.ui.state import signals as signals_state
from rollout_graph.ui.state.signals import Joined, report_caption

# the scatter's points and figure are pure builders (views/builders/mismatch/), named here too
outliers, scatter_figure = mismatch.outliers, mismatch.scatter_figure


def points(rollout: Rollout, shown: dict[int, int] | None = None) -> Points:
    """Each call's compared sampled tokens from the row shown for it, then every flagged token of
    the other rows (:func:`rollout_graph.ui.builders.mismatch.scatter_points`)."""
    return mismatch.scatter_points(rollout, shown)


def rows_frame(rollout: Rollout) -> pd.DataFrame:
    """One row per joined training row: reward, figures, advantage, extra metadata."""
    signals = rollout.signals
    out = []
    for i, joined in sorted(signals.rows.items()):
        seq = rollout.sequences[i]
        m = joined.metrics
        out.append(
            {
                "leaf": rollout.calls[seq.leaf].node_id, "role": seq.role, "reward": joined.row.reward,
                "compared tokens": m["n_tokens"], "mean |Δ|": m["mean_abs_diff"], "max |Δ|": m["max_abs_diff"],
                "KL k3": m["kl_k3"], "ratio outside": m["ratio_outside_share"], "mean advantage": joined.mean_advantage,
                **{f"meta: {k}": str(v) for k, v in joined.row.extra.items()},
            }
        )  # fmt: skip
    return pd.DataFrame(out)


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def render(rollout: Rollout, joined: Joined) -> None:
    """The panel (only when a signals file is joined)."""
    signals = rollout.signals
    if signals is None:
        return
    s = signals.summary()
    title = f"Training signals: reward {_fmt(s['reward'], '.3g')} · max |Δ| {_fmt(s['max_abs_diff'], '.3g')} nats"
    if s["n_mismatch_calls"]:
        title += f" · {s['n_mismatch_calls']} calls over {s['threshold']:g} nat"
    with st.expander(title, expanded=bool(s["n_mismatch_calls"] or s["n_rows_ignored"])):
        caption = report_caption(joined)
        if caption:
            st.html(f'<div style="font:12px system-ui;color:#64748b">{html_text(caption)}</div>')
        if not s["n_rows"]:
            st.caption("The signals file has no usable row for this rollout.")
            return
        cols = st.columns(7)
        tiles = [
            ("reward", _fmt(s["reward"], ".3g")), ("compared tokens", f"{s['n_tokens']:,}"),
            ("mean |Δ|", _fmt(s["mean_abs_diff"], ".3g")), ("max |Δ|", _fmt(s["max_abs_diff"], ".3g")),
            ("KL k3", _fmt(s["kl_k3"], ".2g")), ("ratio ∉ [0.8, 1.2]", _fmt(s["ratio_outside_share"], ".2%")),
            ("rows (ignored)", f"{s['n_rows']} ({s['n_rows_ignored']})"),
        ]  # fmt: skip
        for col, (label, value) in zip(cols, tiles, strict=True):
            col.metric(label, value)
        st.dataframe(rows_frame(rollout), hide_index=True, width="stretch")
        shown = signals_state.shown_rows(rollout)
        p = points(rollout, shown)
        if not p.node.size:
            st.caption("No trainer logprobs on trained tokens: nothing to plot.")
            return
        st.caption(scatter_caption(rollout, p, shown))
        event = st.plotly_chart(
            scatter_figure(rollout, p, signals.threshold), key=f"signals-scatter-{joined.workspace.key}-{rollout.session_id}",
            on_select="rerun", selection_mode="points", width="stretch",
            config={"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]},
        )  # fmt: skip
        _open_point(rollout, p, event.selection.points if event else [], joined.workspace.key)


def scatter_caption(rollout: Rollout, p: Points, shown: dict[int, int]) -> str:
    """What the scatter plots: which row per call (when several cover one) and the flagged tokens."""
    text = "Select a point (outliers in orange) to open its call, its row and its token in the call view."
    signals = rollout.signals
    several = [k for k, spans in sorted(signals.spans.items()) if len(spans) > 1] if signals is not None else []
    if several:
        names = [c.node_id for c in rollout.calls]
        picked = [f"{names[k]}: row {names[rollout.sequences[shown[k]].leaf]}" for k in several if k in shown][:6]
        text += (
            f" {len(several)} call(s) are covered by several joined rows; each call's points come from one row "
            f"(default: the row holding its worst token; pick another in the call's detail): {', '.join(picked)}"
            + (" …" if len(several) > 6 else "")
            + "."
        )
    n_other = int(p.other.sum())
    if n_other:
        text += f" {n_other} flagged token(s) of rows not shown are the red diamonds ({mismatch.OTHER_ROW})."
    return text


def _open_point(rollout: Rollout, p: Points, picked: list, workspace_key: str) -> None:
    """A clicked point selects its call, shows its row and marks its token (once per new click)."""
    hit = mismatch.picked_point(picked)
    if not state.new_pick(f"signals-scatter-{rollout.session_id}", hit):
        return
    assert hit is not None
    node, sequence, offset = hit
    if not 0 <= node < len(rollout.calls) or not 0 <= sequence < len(rollout.sequences):
        return
    signals_state.jump_to_token(rollout, node, sequence, offset)
    st.rerun()
