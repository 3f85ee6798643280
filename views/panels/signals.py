"""The training-signals panel: the open rollout's trainer-vs-inference figures, its rows, and a
scatter of inference vs trainer logprob per token whose points open their token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import html_text, plot
from rollout_graph.ui import state
from rollout_graph.ui.state.signals import Joined, report_caption
from rollout_graph.ui.state.widgets import jump_to

TOP_OUTLIERS = 20  # the largest differences are drawn as outliers even under the threshold


@dataclass(frozen=True)
class Points:
    """Every compared token of the rollout: its call, its index in the sampled span, both logprobs."""

    node: np.ndarray
    offset: np.ndarray
    inference: np.ndarray
    trainer: np.ndarray

    @property
    def diff(self) -> np.ndarray:
        return self.trainer - self.inference


def points(rollout: Rollout) -> Points:
    """One point per compared sampled token, each call once (its first joined row), arrival order."""
    nodes, offsets, inf, tr = [], [], [], []
    signals = rollout.signals
    for k in sorted(signals.calls) if signals is not None else []:
        call = rollout.calls[k]
        trainer = signals.calls[k].trainer
        keep = np.flatnonzero(np.isfinite(trainer))
        if not keep.size or not call.logprobs_aligned:
            continue
        nodes.append(np.full(keep.size, k))
        offsets.append(keep)
        inf.append(call.sampled_logprobs[keep].astype(np.float64))
        tr.append(trainer[keep])
    if not nodes:
        empty = np.empty(0)
        return Points(empty.astype(int), empty.astype(int), empty, empty)
    return Points(np.concatenate(nodes), np.concatenate(offsets), np.concatenate(inf), np.concatenate(tr))


def outliers(p: Points, threshold: float) -> np.ndarray:
    """Indices of the outliers: over the threshold, or among the largest differences."""
    absd = np.abs(p.diff)
    top = np.argsort(-absd, kind="stable")[:TOP_OUTLIERS]
    return np.union1d(np.flatnonzero(absd > threshold), top)


def scatter_figure(rollout: Rollout, p: Points, threshold: float) -> go.Figure:
    """Inference (x) vs trainer (y) logprob; the diagonal is agreement; outliers in orange (pure)."""
    names = [c.node_id for c in rollout.calls]
    out = outliers(p, threshold)
    rest = np.setdiff1d(np.arange(p.node.shape[0]), out)
    lo = float(min(p.inference.min(), p.trainer.min())) if p.node.size else -1.0

    def hover(idx: np.ndarray) -> list[str]:
        return [
            f"{plot(names[p.node[i]])} · sampled token {p.offset[i]}<br>inference {p.inference[i]:.4f}"
            f" · trainer {p.trainer[i]:.4f}<br>Δ {p.diff[i]:+.4f} · ratio {np.exp(p.diff[i]):.3f}"
            for i in idx
        ]

    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=[lo, 0], y=[lo, 0], mode="lines", line={"color": "#94a3b8", "dash": "dot"}, hoverinfo="skip",
                   name="agreement")
    )  # fmt: skip
    for idx, name, colour, size in ((rest, "tokens", "#2563eb", 5), (out, "outliers", "#ea580c", 9)):
        fig.add_trace(
            go.Scattergl(
                x=p.inference[idx], y=p.trainer[idx], mode="markers", name=name,
                marker={"color": colour, "size": size, "opacity": 0.75, "line": {"width": 0}},
                hovertext=hover(idx), hoverinfo="text",
            )
        )  # fmt: skip
    fig.update_layout(
        height=360, margin={"l": 10, "r": 10, "t": 30, "b": 30}, title="Inference vs trainer logprob per sampled token",
        xaxis_title="inference logprob", yaxis_title="trainer logprob", legend={"orientation": "h", "y": -0.2},
        clickmode="event+select", uirevision=rollout.session_id, plot_bgcolor="#ffffff",
    )  # fmt: skip
    return fig


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
        p = points(rollout)
        if not p.node.size:
            st.caption("No trainer logprobs on trained tokens: nothing to plot.")
            return
        st.caption("Select a point (outliers in orange) to open its token in the call view.")
        event = st.plotly_chart(
            scatter_figure(rollout, p, signals.threshold), key=f"signals-scatter-{joined.workspace.key}-{rollout.session_id}",
            on_select="rerun", selection_mode="points", width="stretch",
            config={"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]},
        )  # fmt: skip
        _open_point(rollout, p, event.selection.points if event else [], joined.workspace.key)


def _open_point(rollout: Rollout, p: Points, picked: list, workspace_key: str) -> None:
    out = outliers(p, rollout.signals.threshold)
    groups = {1: np.setdiff1d(np.arange(p.node.shape[0]), out), 2: out}
    hit = next((q for q in picked if q.get("curve_number") in groups), None)
    index = None if hit is None else int(groups[hit["curve_number"]][int(hit["point_index"])])
    if not state.new_pick(f"signals-scatter-{rollout.session_id}", index):
        return
    node, offset = int(p.node[index]), int(p.offset[index])
    call = rollout.calls[node]
    position = call.n_prompt - rollout.context_start(node) + offset if call.prompt_ids is not None else offset
    jump_to(f"tok-{workspace_key}-{rollout.session_id}-{call.node_id}", position)
    state.select_node(rollout, node)
    st.rerun()
