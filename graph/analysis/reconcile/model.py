"""The common model every reconciler answers in: rows made of spans of the calls, and what each
token of a row is to the calls (docs/reconcile.md, "Provenance").

A framework's training row is always a concatenation of slices of the captured calls: a slice of
one call's prompt ids (context, or ids standing where an earlier reply was), or a slice of its
sampled ids (trained or kept as context). A :class:`Segment` is one such slice with the mask and
provenance the framework gives it; a :class:`TrainerRow` is a list of segments plus whether the
trainer trains the row at all. Counting from segments is cheap (no token arrays); the arrays of a
row (:func:`row_tokens`) are built only when a surface shows or exports them.

:class:`Reconciled` is what each reconciler returns for one rollout: its rows, each call's fate
(trained, partly trained, dropped, quarantined), the framework's own notes (NeMo Gym's
``BuildNotes``, TRL's drift tally, ...) and the counts every surface prints (:meth:`Reconciled.summary`).
Entry points: the reconcilers in this package build these; ``explain.differences`` words them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollout_graph.analysis.reconcile.origin import prompt_codes
from rollout_graph.analysis.reconcile.provenance import (
    CONTEXT,
    NO_LOGPROB,
    OFF_POLICY,
    PROVENANCE,
    RETOKENIZED,
    SAMPLED,
    SAMPLED_AS_CONTEXT,
    TRAINED_CODES,
)
from rollout_graph.core.rollout import Rollout

# the provenance codes are also read from here (docs/reconcile.md, "Provenance")
__all__ = [
    "CONTEXT", "NO_LOGPROB", "OFF_POLICY", "PROVENANCE", "RETOKENIZED", "SAMPLED", "SAMPLED_AS_CONTEXT",
    "TRAINED_CODES",
]  # fmt: skip


PROMPT = 0  # a segment's part: a slice of the call's prompt ids ...
OUTPUT = 1  # ... or of its sampled ids

# A call's fate under a framework (each call once).
TRAINED = "trained"  # every sampled token trained in some trained row
PARTLY = "partly"  # some of them
DROPPED = "dropped"  # none of them (the reason says why)
QUARANTINED = "quarantined"  # left out as ambiguous (NeMo Gym)
EMPTY = "empty"  # nothing sampled


@dataclass(frozen=True, slots=True)
class Segment:
    """A slice ``[start, stop)`` of call ``call``'s prompt (``part`` PROMPT) or sampled ids (OUTPUT).

    ``mask`` is the framework's loss mask over the slice; ``logprobs`` says the slice carries the
    call's recorded logprobs (else 0.0); ``provenance`` overrides what :func:`row_tokens` derives
    (OFF_POLICY, NO_LOGPROB, RETOKENIZED), or is None to derive it.
    """

    call: int
    part: int
    start: int
    stop: int
    mask: int
    logprobs: bool = False
    provenance: int | None = None

    def __len__(self) -> int:
        """Tokens in the slice."""
        return self.stop - self.start

    def code(self) -> int:
        """The provenance of the whole segment when it is uniform, else CONTEXT (prompt slices are
        refined per position by :func:`row_tokens`)."""
        if self.provenance is not None:
            return self.provenance
        if self.part == OUTPUT:
            return SAMPLED if self.mask else SAMPLED_AS_CONTEXT
        return CONTEXT


@dataclass(slots=True, repr=False)
class TrainerRow:
    """One row a framework builds: its name there, its segments, and whether it is trained."""

    row_id: str
    segments: list[Segment]
    trained: bool = True
    label: str = ""  # the framework's own label: a role (OpenEnv), main/branch (NeMo Gym), ...
    why_not: str | None = None  # why an untrained row is not trained
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def length(self) -> int:
        """Tokens in the row."""
        return sum(s.stop - s.start for s in self.segments)

    @property
    def n_mask(self) -> int:
        """Loss-mask-1 tokens."""
        return sum(s.stop - s.start for s in self.segments if s.mask)

    def count(self, code: int) -> int:
        """Tokens of a provenance code that is uniform per segment (the trained codes, SAMPLED_AS_CONTEXT)."""
        return sum(s.stop - s.start for s in self.segments if s.code() == code)

    @property
    def calls(self) -> list[int]:
        """The calls whose ids the row holds, in row order, each once."""
        seen: dict[int, None] = {}
        for s in self.segments:
            seen.setdefault(s.call, None)
        return list(seen)

    def __repr__(self) -> str:
        state = "trained" if self.trained else f"not trained ({self.why_not})"
        return f"TrainerRow({self.row_id!r}: {self.length} tokens, {self.n_mask} masked 1, {state})"


@dataclass(slots=True)
class CallFate:
    """What a framework does with one call's sampled tokens, each call once."""

    n_sampled: int
    n_trained: int
    status: str
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The fate as JSON (``inspect --reconcile``'s ``calls``)."""
        return {"n_sampled": self.n_sampled, "n_trained": self.n_trained, "status": self.status, "reason": self.reason}


@dataclass(slots=True, repr=False)
class Reconciled:
    """One framework's reading of one rollout (docs/reconcile.md)."""

    framework: str
    params: dict[str, Any]
    rows: list[TrainerRow]
    fates: list[CallFate]
    notes: dict[str, Any] = field(default_factory=dict)  # the framework's own report, as it words it
    quarantined: list[int] = field(default_factory=list)
    error: str | None = None  # the framework refuses the rollout (it raises, or masks it whole)
    # what the reconciler found worth a sentence: (kind, calls, tokens, cause call or None)
    events: list[tuple[str, list[int], int, int | None]] = field(default_factory=list)

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Reconciled({self.framework}: {s['n_rows_trained']}/{s['n_rows']} rows trained, "
            f"{s['n_trained_tokens']} trained tokens, {s['n_dropped_tokens']} sampled tokens dropped)"
        )

    def summary(self) -> dict[str, Any]:
        """The counts every surface prints (docs/reconcile.md, "The counts")."""
        trained_rows = [r for r in self.rows if r.trained]
        sampled = sum(f.n_sampled for f in self.fates)
        delivered = sum(f.n_trained for f in self.fates)
        never = sum(r.count(OFF_POLICY) for r in trained_rows)
        no_logprob = sum(r.count(NO_LOGPROB) for r in trained_rows)
        return {
            "n_rows": len(self.rows),
            "n_rows_trained": len(trained_rows),
            "n_trained_tokens": sum(r.n_mask for r in trained_rows),
            "n_trained_never_sampled": never,
            "n_trained_without_logprob": no_logprob,
            "n_trained_off_policy": never + no_logprob,
            "n_sampled_tokens": sampled,
            "n_delivered_tokens": delivered,
            "n_dropped_tokens": sampled - delivered,
            "delivered_fraction": round(delivered / sampled, 4) if sampled else None,
            "n_quarantined_calls": len(self.quarantined),
            "n_dropped_calls": sum(1 for f in self.fates if f.status in (DROPPED, QUARANTINED)),
            "error": self.error,
        }


def call_fates(rollout: Rollout, rows: list[TrainerRow], reasons: dict[int, str] | None = None) -> list[CallFate]:
    """Each call's sampled tokens against the trained rows: how many are trained (the union of the
    trained rows' OUTPUT segments with mask 1, each position once) and the status that follows."""
    covered: dict[int, np.ndarray] = {}
    for row in rows:
        if not row.trained:
            continue
        for s in row.segments:
            if s.part == OUTPUT and s.mask and s.stop > s.start:
                flags = covered.get(s.call)
                if flags is None:
                    flags = covered[s.call] = np.zeros(rollout.calls[s.call].n_sampled, dtype=bool)
                flags[s.start : s.stop] = True
    reasons = reasons or {}
    fates = []
    for i, call in enumerate(rollout.calls):
        n = call.n_sampled
        got = int(covered[i].sum()) if i in covered else 0
        if n == 0:
            status = EMPTY
        elif got == n:
            status = TRAINED
        elif got:
            status = PARTLY
        else:
            status = DROPPED
        fates.append(CallFate(n, got, status, reasons.get(i, "") if status not in (TRAINED, EMPTY) else ""))
    return fates


@dataclass(frozen=True, slots=True, repr=False)
class RowTokens:
    """A row's arrays: ids, loss mask, logprobs (0.0 where the framework puts none), the
    provenance code of each position and the call its id comes from."""

    input_ids: np.ndarray
    loss_mask: np.ndarray
    logprobs: np.ndarray
    provenance: np.ndarray
    source_call: np.ndarray

    def __repr__(self) -> str:
        return f"RowTokens({self.input_ids.shape[0]} tokens, {int(self.loss_mask.sum())} masked 1)"


def _ids(rollout: Rollout, s: Segment) -> np.ndarray:
    call = rollout.calls[s.call]
    if s.part == OUTPUT:
        return np.asarray(call.sampled_ids[s.start : s.stop], dtype=np.int64)
    prompt = call.prompt_ids
    if prompt is None:
        return np.empty(0, dtype=np.int64)
    return np.asarray(prompt[s.start : s.stop], dtype=np.int64)


def row_tokens(rollout: Rollout, row: TrainerRow) -> RowTokens:
    """The arrays of one row, with every position's provenance (docs/reconcile.md, "Provenance").

    Prompt positions are refined with the exact graph's context origin: an id an earlier call
    sampled in place is SAMPLED_AS_CONTEXT; ids where a broken replay re-tokenized an earlier reply
    are RETOKENIZED (rollout_graph.analysis.reconcile.origin)."""
    ids, mask, lps, prov, src = [], [], [], [], []
    for s in row.segments:
        n = s.stop - s.start
        if n <= 0:
            continue
        call = rollout.calls[s.call]
        ids.append(_ids(rollout, s))
        mask.append(np.full(n, s.mask, dtype=np.int8))
        if s.logprobs and s.part == OUTPUT and call.sampled_logprobs is not None and call.logprobs_aligned:
            lps.append(np.asarray(call.sampled_logprobs[s.start : s.stop], dtype=np.float64))
        else:
            lps.append(np.zeros(n, dtype=np.float64))
        if s.provenance is not None or s.part == OUTPUT:
            prov.append(np.full(n, s.code(), dtype=np.int8))
        else:
            prov.append(prompt_codes(rollout, s.call, s.start, s.stop))
        src.append(np.full(n, s.call, dtype=np.int32))
    if not ids:
        empty = np.empty(0)
        return RowTokens(
            empty.astype(np.int64), empty.astype(np.int8), empty, empty.astype(np.int8), empty.astype(np.int32)
        )
    return RowTokens(
        np.concatenate(ids), np.concatenate(mask), np.concatenate(lps), np.concatenate(prov), np.concatenate(src)
    )


def prompt_segment(call: int, start: int, stop: int, provenance: int | None = None) -> Segment:
    """A context slice of a call's prompt (mask 0)."""
    return Segment(call, PROMPT, start, stop, 0, False, provenance)


def output_segment(call: int, start: int, stop: int, trained: bool, with_logprobs: bool = True) -> Segment:
    """A slice of a call's sampled ids: trained (mask 1, with its logprobs, or NO_LOGPROB when the
    call recorded none) or kept as context."""
    if not trained:
        return Segment(call, OUTPUT, start, stop, 0, False, None)
    return Segment(call, OUTPUT, start, stop, 1, with_logprobs, None if with_logprobs else NO_LOGPROB)


def truncate(segments: list[Segment], length: int) -> list[Segment]:
    """The segments cut to their first ``length`` tokens."""
    out: list[Segment] = []
    left = length
    for s in segments:
        if left <= 0:
            break
        n = s.stop - s.start
        if n <= left:
            out.append(s)
            left -= n
        else:
            out.append(Segment(s.call, s.part, s.start, s.start + left, s.mask, s.logprobs, s.provenance))
            left = 0
    return out
