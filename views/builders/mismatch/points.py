"""The mismatch lens's data (pure): every compared token as points, per-call flags and shares of
tokens a correction clips or masks, and the flagged tokens of ``logprob_mismatch``.

Entry points: ``row_points`` (every compared position of every joined row: the histogram and the
position/probability figures), ``entropy_points``, ``call_flags`` / ``call_shares`` /
``correction_shares`` (what a correction does to each call; the DAG's share colouring),
``flagged_tokens``, ``worst_token_texts``, ``scatter_points`` (the inference-vs-trainer scatter: each call's shown row
plus every flagged token of the other rows), ``scatter_groups``, ``picked_point`` (a click's
customdata back to call, row, token), ``view_position`` (a sampled token's place in the token view).

Where it sits: between ``rollout.signals`` (graph/signals/) and the figures (figures.py); the
panels views/panels/signals.py and views/panels/corrections.py draw them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.entropy import entropy_lower_bound
from rollout_graph.core.rollout import Rollout
from rollout_graph.signals.corrections import LOG_BOUND, CorrectionError, Evaluation, parse_correction
from rollout_graph.ui.builders.mismatch.rows import _span_d, row_arrays

NONE, CLIPPED, MASKED = 0, 1, 2


MISMATCH = "logprob_mismatch"


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


def worst_token_texts(rollout: Rollout, worst: list[dict], decoder: Decoder | None) -> list[str]:
    """What each of the worst tokens (``summary()["worst_tokens"]``: a row's leaf and a position in
    it) reads, as the token view shows it (``repr``-quoted, so a space or a newline shows); its id
    when there is no decoder."""
    leaves = {rollout.calls[s.leaf].node_id: s for s in rollout.sequences}
    out = []
    for w in worst:
        seq = leaves.get(w["leaf_id"])
        ids = rollout.tokens(seq).input_ids if seq is not None else None
        if ids is None or not 0 <= w["position"] < ids.shape[0]:
            out.append("?")
            continue
        token = int(ids[w["position"]])
        out.append(repr(decoder.pieces([token])[0]) if decoder is not None else f"id {token}")
    return out
