"""The row picker's model (pure): which joined training rows cover a call, which one is shown by
default and why, and that row's arrays for the call's sampled span.

Entry points: ``covering_rows(rollout, node) -> [RowChoice]``, ``default_row`` (the row holding the
call's worst token; the join's own rule), ``resolve_row`` (a picked leaf, else the default),
``row_label`` and ``default_reason`` (the picker's words), ``row_arrays`` (trainer logprobs and
advantages of the call's span in one row).

Where it sits: reads ``rollout.signals`` (graph/signals/join.py); used by the signals state
(views/state/signals.py: the picker and the worst-token jump), the token overlay
(views/builders/overlays.py) and the scatter's points (points.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollout_graph.core.rollout import Rollout
from rollout_graph.signals.join import row_name

STEP_KEYS = ("step", "global_step", "train_step", "training_step", "iteration")  # row metadata naming its step


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
