"""The mismatch lens (pure, no streamlit): the ratio histogram with each correction's bands, mismatch
against position, inference probability and entropy, per-call flags and shares of tokens a
correction touches, and the side-by-side tables (docs/corrections.md).

Every figure reads the joined rows of ``rollout.signals`` (``RowSignals.d``: one value per position
of a training row, NaN where not compared), so it works on whatever produced the signals.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rollout_graph.analysis.entropy import entropy_lower_bound
from rollout_graph.core.rollout import Rollout
from rollout_graph.escape import plot
from rollout_graph.signals.corrections import (
    CLIP,
    COMMON,
    CORRECTIONS_ENV,
    LOG_BOUND,
    TOKEN,
    Correction,
    CorrectionError,
    Evaluation,
    parse_correction,
)

NONE, CLIPPED, MASKED = 0, 1, 2
# the corrections chosen in the Corrections panel (a multiselect's key): the DAG's colour control reads it too
CHOSEN = "rg-corrections-chosen"
# one colour per correction, in the order chosen (colour-blind-safe Okabe-Ito)
COLOURS = ("#E69F00", "#0072B2", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")
BAND_OPACITY = 0.12


def starting_labels() -> list[str]:
    """What is chosen at first: ``view --correction``'s choice, else four common corrections."""
    labels = []
    for text in os.environ.get(CORRECTIONS_ENV, "").split(";"):
        try:
            labels.append(parse_correction(text).label) if text.strip() else None
        except CorrectionError:
            continue
    return labels or list(COMMON)


def chosen_labels(chosen: list[str] | None) -> list[str]:
    """The corrections chosen (the panel's multiselect value), or those it starts with before it is drawn."""
    return list(chosen) if chosen is not None else starting_labels()


def colour(i: int) -> str:
    """The i-th correction's colour."""
    return COLOURS[i % len(COLOURS)]


@dataclass(frozen=True)
class RowPoints:
    """Every compared position of every joined row (each row counts a shared prefix again, as the
    trainer trains it once per row)."""

    sequence: np.ndarray  # index into rollout.sequences
    position: np.ndarray  # position in the row
    d: np.ndarray
    inference: np.ndarray  # the inference logprob

    @property
    def ratio(self) -> np.ndarray:
        return np.exp(np.clip(self.d, -LOG_BOUND, LOG_BOUND))


def row_points(rollout: Rollout) -> RowPoints:
    """One point per compared position of every joined row, in leaf order."""
    seqs, pos, ds, inf = [], [], [], []
    signals = rollout.signals
    for i, joined in sorted(signals.rows.items()) if signals is not None else []:
        where = np.flatnonzero(~np.isnan(joined.d))
        if not where.size:
            continue
        logprobs = rollout.tokens(rollout.sequences[i]).logprobs
        seqs.append(np.full(where.size, i))
        pos.append(where)
        ds.append(joined.d[where])
        inf.append(logprobs[where].astype(np.float64))
    if not seqs:
        e = np.empty(0)
        return RowPoints(e.astype(int), e.astype(int), e, e)
    return RowPoints(np.concatenate(seqs), np.concatenate(pos), np.concatenate(ds), np.concatenate(inf))


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


def entropy_points(rollout: Rollout) -> tuple[np.ndarray, np.ndarray]:
    """(entropy lower bound, |Δ|) per compared sampled token of calls with recorded top-k (each call once)."""
    hs, ds = [], []
    signals = rollout.signals
    for k, cs in sorted(signals.calls.items()) if signals is not None else []:
        call = rollout.calls[k]
        if call.top_k is None or not call.logprobs_aligned:
            continue
        h = entropy_lower_bound(call.top_k, call.n_sampled)
        d = cs.trainer - call.sampled_logprobs.astype(np.float64)
        keep = np.isfinite(h) & ~np.isnan(d)
        hs.append(h[keep])
        ds.append(np.abs(np.clip(d[keep], -LOG_BOUND, LOG_BOUND)))
    if not hs:
        return np.empty(0), np.empty(0)
    return np.concatenate(hs), np.concatenate(ds)


def entropy_figure(h: np.ndarray, absd: np.ndarray) -> go.Figure:
    """|Δ| against the entropy lower bound (from the recorded top-k alternatives)."""
    edges = np.linspace(0, max(float(h.max()) if h.size else 1.0, 1e-3), 21)
    fig = _scatter_with_mean(h, absd, edges, "entropy ≥ %{x:.3f}<br>|Δ| %{y:.4f}<extra></extra>")
    return _layout(fig, "Mismatch against entropy (lower bound, recorded top-k)", "entropy ≥ (nats)", "|Δ| (nats)")


def call_flags(rollout: Rollout, evaluation: Evaluation, node: int) -> dict[str, np.ndarray]:
    """Per correction label: NONE / CLIPPED / MASKED per token of the call's sampled span, from the
    row the call's trainer logprobs come from (the first joined row covering it, leaf order)."""
    signals = rollout.signals
    found = signals.calls.get(node) if signals is not None else None
    n = rollout.calls[node].n_sampled
    out = {}
    for c in evaluation.corrections:
        flags = np.zeros(n, dtype=np.int8)
        result = None if found is None else evaluation.rows[c.label].get(found.sequence)
        if found is not None and result is not None:
            span = slice(found.begin, found.begin + n)
            flags[result.affected[span]] = CLIPPED
            flags[result.masked[span]] = MASKED
        out[c.label] = flags
    return out


def call_shares(rollout: Rollout, evaluation: Evaluation, label: str) -> dict[int, float]:
    """Per call with compared tokens: the share of them the correction ``label`` clips or masks
    (for colouring the DAG by a correction)."""
    signals = rollout.signals
    out: dict[int, float] = {}
    for k, cs in signals.calls.items() if signals is not None else []:
        compared = int(np.count_nonzero(~np.isnan(cs.trainer)))
        if compared:
            flags = call_flags(rollout, evaluation, k)[label]
            out[k] = float(np.count_nonzero(flags)) / compared
    return out


def comparison_frame(evaluation: Evaluation) -> pd.DataFrame:
    """One row per correction: tokens and rows affected, weight lost, ESS (side by side)."""
    rows = []
    for e in evaluation.as_list():
        rows.append(
            {
                "correction": e["label"], "tokens affected": e["tokens_affected"], "of tokens": e["n_tokens"],
                "share": e["share_tokens"], "rows affected": e["sequences_affected"], "of rows": e["n_sequences"],
                "weight lost": e["weight_lost"], "ESS": e["ess"],
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def disagreement_frame(evaluation: Evaluation) -> pd.DataFrame:
    """One row per pair of corrections: tokens only one touches, both, and masked by one, kept by the other."""
    return pd.DataFrame(
        [
            {
                "A": x["a"], "B": x["b"], "only A": x["only_a"], "only B": x["only_b"], "both": x["both"],
                "A masks, B keeps": x["a_masks_b_keeps"], "B masks, A keeps": x["b_masks_a_keeps"],
            }
            for x in evaluation.disagreements()
        ]
    )  # fmt: skip


def worst_frame(worst: list[dict]) -> pd.DataFrame:
    """The worst tokens (largest |Δ|) as a table."""
    return pd.DataFrame(
        [
            {
                "call": w["node_id"], "row (leaf)": w["leaf_id"], "position": w["position"], "Δ": w["d"],
                "ratio": float(np.exp(np.clip(w["d"], -LOG_BOUND, LOG_BOUND))),
                "inference logprob": w["inference_logprob"], "trainer logprob": w["trainer_logprob"],
            }
            for w in worst
        ]
    )  # fmt: skip


def audit_comparison(frame: pd.DataFrame) -> pd.DataFrame | None:
    """The corrections side by side over a whole audit (its ``corrections`` column, combined
    exactly: docs/corrections.md); ``None`` when the audit was run without ``--correction``."""
    from rollout_graph.signals.corrections import combine

    if "corrections" not in frame:
        return None
    entries = [list(e) for e in frame["corrections"] if e is not None and len(e)]
    if not entries:
        return None
    return pd.DataFrame(
        [
            {
                "correction": t["label"], "tokens affected": t["tokens_affected"], "of tokens": t["n_tokens"],
                "share": t["share_tokens"], "rows affected": t["sequences_affected"], "of rows": t["n_sequences"],
                "weight lost": t["weight_lost"], "ESS": t["ess"],
            }
            for t in combine(entries)
        ]
    )  # fmt: skip


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


def correction_shares(rollout: Rollout, label: str) -> dict[int, float]:
    """:func:`call_shares` for one correction given by its label (empty without joined signals or
    for a label that does not parse)."""
    if rollout.signals is None:
        return {}
    try:
        correction = parse_correction(label)
    except CorrectionError:
        return {}
    return call_shares(rollout, rollout.signals.evaluate([correction]), correction.label)


def share_gradient(steps: int = 5) -> str:
    """A CSS linear gradient of the share scale, 0 (left) to 1 (right), for a legend."""
    from plotly.colors import sample_colorscale

    return (
        "linear-gradient(to right, "
        + ", ".join(sample_colorscale(SHARE_SCALE, [i / (steps - 1) for i in range(steps)]))
        + ")"
    )
