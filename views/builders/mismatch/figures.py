"""The mismatch lens's figures (pure plotly): the ratio histogram with each correction's band or
cap, row ratios, mismatch against position, inference probability and entropy, the
inference-vs-trainer scatter, and the share-of-tokens colour scale the DAG uses.

Entry points: ``ratio_histogram``, ``row_ratio_figure``, ``position_figure``,
``probability_figure``, ``entropy_figure``, ``scatter_figure``; ``colour(i)`` (the i-th chosen
correction's colour), ``share_colours`` and ``share_gradient`` (0 pale .. 1 dark red).

Where it sits: draws the points of points.py; called by views/panels/corrections.py and
views/panels/signals.py; the DAG (views/builders/dag/) fills calls with ``share_colours``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import plot
from rollout_graph.signals.corrections import CLIP, LOG_BOUND, TOKEN, Correction
from rollout_graph.ui.builders.mismatch.points import OTHER_ROW, Points, RowPoints, scatter_groups

# one colour per correction, in the order chosen (colour-blind-safe Okabe-Ito)
COLOURS = ("#E69F00", "#0072B2", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")


BAND_OPACITY = 0.12


def colour(i: int) -> str:
    """The i-th correction's colour."""
    return COLOURS[i % len(COLOURS)]


def _layout(fig: go.Figure, title: str, x: str, y: str, log_x: bool = False) -> go.Figure:
    fig.update_layout(
        height=320, margin={"l": 10, "r": 10, "t": 34, "b": 30}, title=title, xaxis_title=x, yaxis_title=y,
        legend={"orientation": "h", "y": -0.28}, plot_bgcolor="#ffffff", bargap=0.02,
    )  # fmt: skip
    if log_x:
        fig.update_xaxes(type="log")
    fig.update_xaxes(gridcolor="#e2e8f0")
    fig.update_yaxes(gridcolor="#e2e8f0")
    return fig


def _band_shapes(fig: go.Figure, corrections: list[Correction], level: str, floor: float) -> None:
    """Each correction of ``level`` as a shaded 'kept' band (masks) or a line at its cap (clips).

    Shapes take data values on a log axis, annotations log10 values; a band from 0 starts at ``floor``."""
    for i, c in enumerate(corrections):
        if (c.kind.level == TOKEN) != (level == TOKEN):
            continue
        label = {"text": plot(c.label), "font": {"size": 10, "color": colour(i)}}
        if c.kind.action == CLIP:
            x = c.param("cap")
            fig.add_vline(x=x, line={"color": colour(i), "width": 2, "dash": "dash"})
        else:
            low, high = max(c.param("low"), floor), c.param("high")
            fig.add_vrect(x0=low, x1=high, fillcolor=colour(i), opacity=BAND_OPACITY, line_width=0)
            for edge in (low, high):
                fig.add_vline(x=edge, line={"color": colour(i), "width": 1.5})
            x = float(np.sqrt(low * high))
        fig.add_annotation(
            x=float(np.log10(x)), y=1.0 - 0.07 * i, yref="paper", showarrow=False, yanchor="bottom", **label
        )


def _log_range(values: np.ndarray, corrections: list[Correction], level: str) -> tuple[float, float]:
    """A log10 x range covering the values and the chosen corrections' finite, non-zero edges."""
    points = [float(v) for v in values if v > 0] or [1.0]
    for c in corrections:
        if (c.kind.level == TOKEN) == (level == TOKEN):
            points += [v for k, v in c.params if v > 0]
    lo, hi = np.log10(min(points)), np.log10(max(points))
    pad = max(0.05, 0.06 * (hi - lo))
    return float(lo - pad), float(hi + pad)


def _log_bins(values: np.ndarray, n: int = 60) -> np.ndarray:
    lo = float(np.log10(max(values.min(), 1e-9)))
    hi = float(np.log10(max(values.max(), 1e-9)))
    if hi - lo < 1e-3:
        lo, hi = lo - 0.05, hi + 0.05
    return np.logspace(lo, hi, n + 1)


def ratio_histogram(p: RowPoints, corrections: list[Correction]) -> go.Figure:
    """The token ratios ``r = exp(d)`` on a log axis (bars: counts), with each token correction's
    band or cap drawn over them."""
    r = p.ratio
    fig = go.Figure()
    if r.size:
        edges = _log_bins(r)
        counts, _ = np.histogram(r, bins=edges)
        centres = np.sqrt(edges[:-1] * edges[1:])
        fig.add_trace(
            go.Bar(
                x=centres, y=counts, width=np.diff(edges), marker={"color": "#64748b"}, name="tokens",
                hovertemplate="ratio %{x:.4f}<br>%{y} tokens<extra></extra>",
            )
        )  # fmt: skip
    lo, hi = _log_range(r, corrections, TOKEN)
    _band_shapes(fig, corrections, TOKEN, 10**lo)
    fig.add_vline(x=1.0, line={"color": "#0f172a", "width": 1, "dash": "dot"})
    fig = _layout(fig, "Token importance ratio exp(Δ) (log axis)", "trainer / inference probability", "tokens", True)
    fig.update_xaxes(range=[lo, hi])
    fig.update_layout(margin={"t": 34 + 14 * len(corrections)})
    return fig


def row_ratio_figure(rollout: Rollout, corrections: list[Correction]) -> go.Figure:
    """Each joined row's sequence ratio R and geometric ratio G (log axis), with the row corrections' bands."""
    names, big_r, big_g = [], [], []
    for i, joined in sorted(rollout.signals.rows.items()) if rollout.signals is not None else []:
        d = np.clip(joined.d[~np.isnan(joined.d)], -LOG_BOUND, LOG_BOUND)
        if not d.size:
            continue
        names.append(rollout.calls[rollout.sequences[i].leaf].node_id)
        big_r.append(float(np.exp(np.clip(d.sum(), -LOG_BOUND, LOG_BOUND))))
        big_g.append(float(np.exp(d.mean())))
    fig = go.Figure()
    for values, name, symbol in ((big_r, "R = exp(Σ Δ)", "circle"), (big_g, "G = exp(mean Δ)", "diamond")):
        fig.add_trace(
            go.Scatter(
                x=values, y=[plot(n) for n in names], mode="markers", name=name,
                marker={"symbol": symbol, "size": 9, "color": "#334155" if symbol == "circle" else "#94a3b8"},
                hovertemplate="row %{y}<br>" + name.split(" ")[0] + " %{x:.5g}<extra></extra>",
            )
        )  # fmt: skip
    lo, hi = _log_range(np.array(big_r + big_g), corrections, "sequence")
    _band_shapes(fig, corrections, "sequence", 10**lo)
    fig.add_vline(x=1.0, line={"color": "#0f172a", "width": 1, "dash": "dot"})
    fig = _layout(fig, "Row ratios: sequence R and geometric G (log axis)", "ratio", "row (leaf)", True)
    fig.update_xaxes(range=[lo, hi])
    fig.update_yaxes(tickmode="array", tickvals=[plot(n) for n in names])
    fig.update_layout(height=max(360, 90 + 28 * len(names)), margin={"t": 34 + 14 * len(corrections)})
    return fig


def _binned(x: np.ndarray, y: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    which = np.clip(np.digitize(x, edges) - 1, 0, edges.size - 2)
    centres, means = [], []
    for b in range(edges.size - 1):
        here = which == b
        if here.any():
            centres.append((edges[b] + edges[b + 1]) / 2)
            means.append(float(y[here].mean()))
    return np.array(centres), np.array(means)


def _scatter_with_mean(x: np.ndarray, y: np.ndarray, edges: np.ndarray, hover: str) -> go.Figure:
    fig = go.Figure()
    fig.add_trace(
        go.Scattergl(
            x=x, y=y, mode="markers", name="tokens", hovertemplate=hover,
            marker={"color": "#2563eb", "size": 4, "opacity": 0.35, "line": {"width": 0}},
        )
    )  # fmt: skip
    if x.size:
        cx, my = _binned(x, y, edges)
        fig.add_trace(
            go.Scatter(x=cx, y=my, mode="lines+markers", name="mean |Δ| per bin", line={"color": "#ea580c", "width": 2})
        )
    return fig


def position_figure(p: RowPoints) -> go.Figure:
    """|Δ| against the position in the row, with the mean per bin."""
    absd = np.abs(np.clip(p.d, -LOG_BOUND, LOG_BOUND))
    edges = np.linspace(0, max(1, int(p.position.max()) + 1 if p.position.size else 1), 31)
    fig = _scatter_with_mean(p.position.astype(float), absd, edges, "position %{x}<br>|Δ| %{y:.4f}<extra></extra>")
    return _layout(fig, "Mismatch against position in the row", "position in the training row", "|Δ| (nats)")


def probability_figure(p: RowPoints) -> go.Figure:
    """|Δ| against the inference probability of the token (log axis): the low-probability tail is
    where mismatch concentrates."""
    prob = np.exp(p.inference)
    absd = np.abs(np.clip(p.d, -LOG_BOUND, LOG_BOUND))
    keep = prob > 0
    edges = np.logspace(np.log10(max(prob[keep].min(), 1e-12)), 0, 21) if keep.any() else np.array([1e-12, 1.0])
    fig = _scatter_with_mean(prob[keep], absd[keep], edges, "p %{x:.3g}<br>|Δ| %{y:.4f}<extra></extra>")
    return _layout(fig, "Mismatch against the inference probability", "inference probability (log axis)",
                   "|Δ| (nats)", True)  # fmt: skip


def entropy_figure(h: np.ndarray, absd: np.ndarray) -> go.Figure:
    """|Δ| against the entropy lower bound (from the recorded top-k alternatives)."""
    edges = np.linspace(0, max(float(h.max()) if h.size else 1.0, 1e-3), 21)
    fig = _scatter_with_mean(h, absd, edges, "entropy ≥ %{x:.3f}<br>|Δ| %{y:.4f}<extra></extra>")
    return _layout(fig, "Mismatch against entropy (lower bound, recorded top-k)", "entropy ≥ (nats)", "|Δ| (nats)")


def scatter_figure(rollout: Rollout, p: Points, threshold: float) -> go.Figure:
    """Inference (x) vs trainer (y) logprob; the diagonal is agreement; outliers in orange; flagged
    tokens of rows not shown as red open diamonds. Each point's ``customdata`` is
    [arrival index, sequence index, offset in the sampled span]. The same inputs give the same
    figure (a rerun keeps the chart and its selection)."""
    names = [c.node_id for c in rollout.calls]
    leaves = [names[s.leaf] for s in rollout.sequences]
    lo = float(min(p.inference.min(), p.trainer.min())) if p.node.size else -1.0

    def hover(idx: np.ndarray) -> list[str]:
        return [
            f"{plot(names[p.node[i]])} · sampled token {p.offset[i]} · row {plot(leaves[p.sequence[i]])}"
            f"<br>inference {p.inference[i]:.4f} · trainer {p.trainer[i]:.4f}"
            f"<br>Δ {p.diff[i]:+.4f} · ratio {np.exp(np.clip(p.diff[i], -LOG_BOUND, LOG_BOUND)):.3f}"
            for i in idx
        ]

    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=[lo, 0], y=[lo, 0], mode="lines", line={"color": "#94a3b8", "dash": "dot"}, hoverinfo="skip",
                   name="agreement")
    )  # fmt: skip
    styles = {
        "tokens": {"color": "#2563eb", "size": 5, "opacity": 0.75, "line": {"width": 0}},
        "outliers": {"color": "#ea580c", "size": 9, "opacity": 0.75, "line": {"width": 0}},
        OTHER_ROW: {"color": "#dc2626", "size": 11, "symbol": "diamond-open", "line": {"width": 2}},
    }
    for name, idx in scatter_groups(p, threshold).items():
        if name == OTHER_ROW and not idx.size:
            continue
        fig.add_trace(
            go.Scattergl(
                x=p.inference[idx], y=p.trainer[idx], mode="markers", name=name, marker=styles[name],
                customdata=np.stack([p.node[idx], p.sequence[idx], p.offset[idx]], axis=1).tolist() if idx.size else None,
                hovertext=hover(idx), hoverinfo="text",
            )
        )  # fmt: skip
    fig.update_layout(
        height=360, margin={"l": 10, "r": 10, "t": 30, "b": 30}, title="Inference vs trainer logprob per sampled token",
        xaxis_title="inference logprob", yaxis_title="trainer logprob", legend={"orientation": "h", "y": -0.2},
        clickmode="event+select", uirevision=rollout.session_id, plot_bgcolor="#ffffff",
    )  # fmt: skip
    return fig


SHARE_SCALE = "YlOrRd"  # 0: pale, 1: dark red (sequential, readable in greyscale)


NO_SHARE = "#cbd5e1"  # a call without compared trainable tokens (neutral grey)


def share_colours(shares: dict[int, float]) -> dict[int, str]:
    """A fill colour per call from :func:`call_shares` (0 pale yellow .. 1 dark red), for a DAG
    colour mode "share of tokens a correction touches"; calls without compared tokens get none."""
    from plotly.colors import sample_colorscale

    return {k: sample_colorscale(SHARE_SCALE, [_scale_point(v)])[0] for k, v in shares.items()}


SHARE_START = 0.15  # the scale's first colour: 0 % stays visible on white (its palest yellow does not)


def _scale_point(share: float) -> float:
    return SHARE_START + (1.0 - SHARE_START) * min(1.0, max(0.0, share))


def share_gradient(steps: int = 5) -> str:
    """A CSS linear gradient of the share scale, 0 (left) to 1 (right), for a legend."""
    from plotly.colors import sample_colorscale

    return (
        "linear-gradient(to right, "
        + ", ".join(sample_colorscale(SHARE_SCALE, [i / (steps - 1) for i in range(steps)]))
        + ")"
    )
