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
from rollout_graph.signals.join import row_name

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


# ---- which joined row a call's overlay and scatter show (the row picker), and every flagged token

STEP_KEYS = ("step", "global_step", "train_step", "training_step", "iteration")  # row metadata naming its step
MISMATCH = "logprob_mismatch"


@dataclass(frozen=True)
class RowChoice:
    """One joined row covering a call: what the row picker offers."""

    sequence: int  # index into rollout.sequences
    leaf_id: str
    begin: int  # where the call's sampled span starts in the row
    name: str  # "row c2 (mine.signals.jsonl line 2)"
    step: str | None  # the row's training step, from its metadata (STEP_KEYS)
    n_compared: int  # the call's sampled tokens this row compares
    worst_offset: int | None  # the row's worst token of the call (index in its sampled span)
    worst_d: float | None  # that token's trainer - inference logprob

    @property
    def worst_abs(self) -> float:
        return -1.0 if self.worst_d is None else abs(self.worst_d)


def _span_d(rollout: Rollout, node: int, sequence: int, begin: int) -> np.ndarray:
    """trainer - inference per sampled token of ``node`` in the joined row ``sequence`` (NaN: not compared)."""
    assert rollout.signals is not None
    joined = rollout.signals.rows[sequence]
    return joined.d[begin : begin + rollout.calls[node].n_sampled]


def covering_rows(rollout: Rollout, node: int) -> list[RowChoice]:
    """Every joined row covering the call's sampled span, in leaf order (the rollout's sequences)."""
    signals = rollout.signals
    if signals is None:
        return []
    out = []
    for sequence, begin in signals.spans.get(node, []):
        joined = signals.rows[sequence]
        d = _span_d(rollout, node, sequence, begin)
        compared = np.flatnonzero(~np.isnan(d))
        worst = int(compared[np.argmax(np.abs(d[compared]))]) if compared.size else None
        step = next((str(joined.row.extra[k]) for k in STEP_KEYS if k in joined.row.extra), None)
        out.append(
            RowChoice(
                sequence, rollout.calls[rollout.sequences[sequence].leaf].node_id, begin,
                row_name(rollout, signals, sequence), step, int(compared.size), worst,
                None if worst is None else float(d[worst]),
            )
        )  # fmt: skip
    return out


def default_row(rows: list[RowChoice]) -> RowChoice | None:
    """The row shown unless the user picks another: the one holding the call's worst token (the
    largest |trainer - inference|); on a tie, or when no row compares a token, the first in leaf
    order. The same rule as the join's per-call arrays (``RolloutSignals.calls``)."""
    best = None
    for r in rows:
        if best is None or r.worst_abs > best.worst_abs:
            best = r
    return best


def resolve_row(rows: list[RowChoice], wanted_leaf: str | None) -> RowChoice | None:
    """The row named ``wanted_leaf`` when it covers the call, else the default."""
    return next((r for r in rows if r.leaf_id == wanted_leaf), None) or default_row(rows)


def row_label(choice: RowChoice, default: RowChoice | None) -> str:
    """One picker option: the row's leaf, step and source, its worst token, whether it is the default."""
    parts = [choice.name]
    if choice.step is not None:
        parts.append(f"step {choice.step}")
    if choice.worst_d is None:
        parts.append("no trainer logprobs here")
    else:
        parts.append(f"worst Δ {choice.worst_d:+.3g} at sampled token {choice.worst_offset}")
    if default is not None and choice.sequence == default.sequence:
        parts.append("default")
    return " · ".join(parts)


def default_reason(rows: list[RowChoice]) -> str:
    """Why the default row is the default, in one sentence."""
    best = default_row(rows)
    if best is None:
        return "No joined row covers this call."
    if len(rows) == 1:
        return f"{best.name} is the only joined row through this call."
    if best.worst_d is None:
        return f"No row compares a token of this call: {best.name}, the first in leaf order, is shown."
    tied = [r for r in rows if r.worst_abs == best.worst_abs]
    why = (
        f"{best.name} is the default: it holds the call's worst token (sampled token {best.worst_offset}, "
        f"Δ {best.worst_d:+.3g} nats) of the {len(rows)} rows through this call"
    )
    return why + (" (a tie: the first in leaf order)." if len(tied) > 1 else ".")


def row_arrays(rollout: Rollout, node: int, sequence: int) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(trainer logprobs, advantages) of the call's sampled span as the joined row ``sequence``
    gives them (trainer NaN where not compared), or None when that row does not cover the call."""
    signals = rollout.signals
    begin = next((b for s, b in signals.spans.get(node, []) if s == sequence), None) if signals else None
    if signals is None or begin is None:
        return None
    row = signals.rows[sequence].row
    n = rollout.calls[node].n_sampled
    span = slice(begin, begin + n)
    trainer = np.full(n, np.nan)
    if row.trainer_logprobs is not None:
        trainer = np.where(~np.isnan(signals.rows[sequence].d[span]), row.trainer_logprobs[span], np.nan)
    return trainer, None if row.advantages is None else row.advantages[span].copy()


@dataclass(frozen=True)
class Flagged:
    """A token that raised WARN ``logprob_mismatch``: over the threshold in one joined row."""

    node: int
    sequence: int
    offset: int  # index in the call's sampled span
    d: float


def flagged_tokens(rollout: Rollout) -> list[Flagged]:
    """Every token over the threshold, in every joined row, of every call with a ``logprob_mismatch``
    (call order, then leaf order, then position)."""
    signals = rollout.signals
    if signals is None:
        return []
    flagged_calls = sorted({rollout.index_of(f.node_id) for f in signals.findings if f.code == MISMATCH and f.node_id})
    out = []
    for node in flagged_calls:
        for sequence, begin in signals.spans.get(node, []):
            d = _span_d(rollout, node, sequence, begin)
            for k in np.flatnonzero(np.abs(np.nan_to_num(d)) > signals.threshold):
                out.append(Flagged(node, sequence, int(k), float(d[k])))
    return out


@dataclass(frozen=True)
class Points:
    """The scatter's tokens: each call's sampled tokens from the row shown for it, then the flagged
    tokens of the other rows (``other``), each with its call, row and index in the sampled span."""

    node: np.ndarray
    sequence: np.ndarray
    offset: np.ndarray
    inference: np.ndarray
    trainer: np.ndarray
    other: np.ndarray  # bool: a flagged token of a row not shown for its call

    @property
    def diff(self) -> np.ndarray:
        return self.trainer - self.inference


def shown_rows(rollout: Rollout, wanted: dict[int, str] | None = None) -> dict[int, int]:
    """The row shown per call with signals (arrival index -> sequence index): the leaf ``wanted``
    names for it when that row covers it, else the default (the join's per-call row)."""
    signals = rollout.signals
    if signals is None:
        return {}
    out = {k: cs.sequence for k, cs in signals.calls.items()}
    for node, leaf_id in (wanted or {}).items():
        for sequence, _ in signals.spans.get(node, []):
            if rollout.calls[rollout.sequences[sequence].leaf].node_id == leaf_id:
                out[node] = sequence
    return out


def scatter_points(rollout: Rollout, shown: dict[int, int] | None = None) -> Points:
    """One point per compared sampled token of each call (from the row ``shown`` for it; default:
    :func:`shown_rows`), then every flagged token of the other rows, so each token that raised
    ``logprob_mismatch`` is plotted."""
    signals = rollout.signals
    rows = shown_rows(rollout) if shown is None else shown
    nodes, seqs, offsets, inf, tr, other = [], [], [], [], [], []

    def add(node: int, sequence: int, keep: np.ndarray, trainer: np.ndarray, is_other: bool) -> None:
        inference = rollout.calls[node].sampled_logprobs
        assert inference is not None  # logprobs_aligned
        nodes.append(np.full(keep.size, node))
        seqs.append(np.full(keep.size, sequence))
        offsets.append(keep)
        inf.append(inference[keep].astype(np.float64))
        tr.append(trainer[keep])
        other.append(np.full(keep.size, is_other))

    for k in sorted(signals.calls) if signals is not None else []:
        call = rollout.calls[k]
        sequence = rows.get(k, signals.calls[k].sequence)
        arrays = row_arrays(rollout, k, sequence)
        if arrays is None or not call.logprobs_aligned:
            continue
        keep = np.flatnonzero(np.isfinite(arrays[0]))
        if keep.size:
            add(k, sequence, keep, arrays[0], False)
    for f in flagged_tokens(rollout):
        inference = rollout.calls[f.node].sampled_logprobs
        if rows.get(f.node) != f.sequence and rollout.calls[f.node].logprobs_aligned and inference is not None:
            trainer = np.full(rollout.calls[f.node].n_sampled, np.nan)
            trainer[f.offset] = inference[f.offset] + f.d
            add(f.node, f.sequence, np.array([f.offset]), trainer, True)
    if not nodes:
        e = np.empty(0)
        return Points(e.astype(int), e.astype(int), e.astype(int), e, e, e.astype(bool))
    cat = np.concatenate
    return Points(cat(nodes), cat(seqs), cat(offsets), cat(inf), cat(tr), cat(other))


TOP_OUTLIERS = 20  # the largest differences are drawn as outliers even under the threshold
OTHER_ROW = "flagged, in another row"  # the scatter trace of flagged tokens of rows not shown


def outliers(p: Points, threshold: float) -> np.ndarray:
    """Indices of the outliers among the shown rows' points: over the threshold, or among the
    largest differences."""
    shown = np.flatnonzero(~p.other)
    absd = np.abs(p.diff[shown])
    top = shown[np.argsort(-absd, kind="stable")[:TOP_OUTLIERS]]
    return np.union1d(shown[absd > threshold], top)


def scatter_groups(p: Points, threshold: float) -> dict[str, np.ndarray]:
    """The point indices of each marker trace, by trace name, in drawing order."""
    out = outliers(p, threshold)
    rest = np.setdiff1d(np.flatnonzero(~p.other), out)
    return {"tokens": rest, "outliers": out, OTHER_ROW: np.flatnonzero(p.other)}


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


def picked_point(points: list) -> tuple[int, int, int] | None:
    """(arrival index, sequence index, offset) of the first clicked scatter point, from its customdata."""
    for q in points:
        data = q.get("customdata")
        if isinstance(data, dict):  # a row of a typed array arrives as {"0": .., "1": .., "2": ..}
            data = [data.get(str(k)) for k in range(3)]
        if isinstance(data, list | tuple) and len(data) == 3:
            try:
                return int(data[0]), int(data[1]), int(data[2])
            except (TypeError, ValueError):
                continue
    return None


def view_position(rollout: Rollout, node: int, offset: int) -> int:
    """The position of the call's sampled token ``offset`` in its token view (context span first)."""
    call = rollout.calls[node]
    context = call.n_prompt - rollout.context_start(node) if call.prompt_ids is not None else 0
    return context + offset
