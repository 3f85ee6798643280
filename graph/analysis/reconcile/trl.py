"""TRL's reconciler: a chain of turns -> training rows, CLEAN / REALIGN / FORK (docs/reconcile.md, "TRL").

Follows ``trl/experimental/async_grpo/async_rollout_worker.py`` of trl 1.16.0 (PyPI), path by path:
``_chain_to_sequences`` walks the turns in order with one ``_SampleBuilder`` per row;
``_SampleBuilder.classify_token_drift`` compares the tokens held (always the previous turn's
prompt + output) with the new prompt: no drift is CLEAN (append the new prompt tail as context,
then the output, trained); a drift that starts inside the last answer and is shorter than
``fork_threshold_tokens`` (``async_grpo_config.py``: 1024) is REALIGN (the drifted tail overwritten
by the new prompt's ids, as context: the model's own sampled ids there are dropped); anything else
is FORK (a new row starts with the whole prompt as context). Rows without a trained token are left
out. ``_append`` raises when an output has no logprob per token: TRL then builds no rows at all.

Which turns: ``source="calls"`` is TRL's own rollout loop (``_generate_one``: every generation call
of the conversation, in order: here every call with prompt ids, in arrival order);
``source="openenv"`` is its OpenEnv harness (``openenv_harness.py``: the agent turns OpenEnv's
training trace selects, with ``fork_threshold_tokens`` 0 by ``lossless_capture``).
Entry point: :func:`reconcile_trl`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rollout_graph.analysis.reconcile.model import (
    OUTPUT,
    Reconciled,
    Segment,
    TrainerRow,
    call_fates,
    output_segment,
    prompt_segment,
    truncate,
)
from rollout_graph.core.rollout import Rollout

CLEAN, REALIGN, FORK = "clean", "realign", "fork"
DEFAULT_FORK_THRESHOLD = 1024  # async_grpo_config.py, fork_threshold_tokens
SOURCES = ("calls", "openenv")


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading ids ``a`` and ``b`` share (``_common_prefix_len``)."""
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.shape[0] else n


def _end(rollout: Rollout, k: int) -> np.ndarray:
    call = rollout.calls[k]
    prompt = call.prompt_ids if call.prompt_ids is not None else np.empty(0, dtype=np.int64)
    return np.concatenate([np.asarray(prompt, dtype=np.int64), np.asarray(call.sampled_ids, dtype=np.int64)])


@dataclass(slots=True)
class _Builder:
    """``_SampleBuilder``: the segments held and where the last answer starts."""

    segments: list[Segment] = field(default_factory=list)
    length: int = 0
    last_response_start: int | None = None
    last: int | None = None  # the turn whose prompt + output the held tokens are

    def trained(self) -> bool:
        return any(s.mask for s in self.segments)


class LogprobsMissing(ValueError):
    """``_SampleBuilder._append``'s refusal: trained tokens need one logprob per token."""


def _append_turn(rollout: Rollout, b: _Builder, k: int, kind: str, matched: int, output_mask: bool) -> None:
    call = rollout.calls[k]
    n_prompt = call.n_prompt
    if kind == REALIGN:  # _align_to_prompt: tokens[matched:] = prompt[matched:], mask 0, logprob 0.0
        b.segments = truncate(b.segments, matched)
        if n_prompt > matched:
            b.segments.append(prompt_segment(k, matched, n_prompt))
    elif n_prompt > b.length:  # CLEAN: the held tokens are a prefix of the prompt: append the tail as context
        b.segments.append(prompt_segment(k, b.length, n_prompt))
    b.length = n_prompt  # either way the row now holds exactly this prompt (matched <= its length)
    b.last_response_start = b.length
    n = call.n_sampled
    if n:
        if output_mask and not call.logprobs_aligned:
            raise LogprobsMissing(f"{call.node_id}: logprobs must contain one entry per token")
        b.segments.append(output_segment(k, 0, n, output_mask))
        b.length += n
    b.last = k


@dataclass(slots=True)
class ChainResult:
    """``_chain_to_sequences``' rows and tally, with what each transition did."""

    rows: list[TrainerRow]
    tally: dict[str, float]
    transitions: list[tuple[int, int, str, int, int]]  # (previous, turn, kind, drift, trained tokens masked)


def chain_to_rows(
    rollout: Rollout, turns: list[int], fork_threshold: int, masks: dict[int, bool] | None = None
) -> ChainResult:
    """``_chain_to_sequences`` over calls ``turns`` (arrival indices, in order).

    Raises:
        LogprobsMissing: a turn to train has no logprob per sampled token (TRL's ValueError).
    """
    masks = masks or {}
    builders: list[_Builder] = []
    tally = {"clean": 0.0, "realign": 0.0, "fork": 0.0, "transitions": 0.0, "drift_tokens": 0.0, "drift_max": 0.0}
    transitions: list[tuple[int, int, str, int, int]] = []
    for k in turns:
        mask = masks.get(k, True)
        if not builders:
            builders.append(_Builder())
            _append_turn(rollout, builders[-1], k, CLEAN, 0, mask)
            continue
        b = builders[-1]
        assert b.last is not None and b.last_response_start is not None
        held = _end(rollout, b.last)
        prompt = rollout.calls[k].prompt_ids
        prompt_ids = np.asarray(prompt, dtype=np.int64) if prompt is not None else np.empty(0, dtype=np.int64)
        matched = common_prefix(held, prompt_ids)
        drift = held.shape[0] - matched
        if drift == 0:
            kind = CLEAN
        elif matched >= b.last_response_start and drift < fork_threshold:
            kind = REALIGN
        else:
            kind = FORK
        tally[kind] += 1
        tally["transitions"] += 1
        tally["drift_tokens"] += drift
        tally["drift_max"] = max(tally["drift_max"], drift)
        masked = 0
        if kind == REALIGN:
            cut = truncate(b.segments, matched)
            masked = sum(s.stop - s.start for s in b.segments if s.mask) - sum(s.stop - s.start for s in cut if s.mask)
        transitions.append((b.last, k, kind, drift, masked))
        if kind == FORK:
            nb = _Builder()
            _append_turn(rollout, nb, k, CLEAN, 0, mask)
            builders.append(nb)
        else:
            _append_turn(rollout, b, k, kind, matched, mask)
    rows = [
        TrainerRow(f"row-{i}", b.segments, True, "", None, {"calls": _row_calls(b)})
        for i, b in enumerate(bb for bb in builders if bb.trained())
    ]
    return ChainResult(rows, tally, transitions)


def _row_calls(b: _Builder) -> list[int]:
    return list(dict.fromkeys(s.call for s in b.segments if s.part == OUTPUT))


def reconcile_trl(rollout: Rollout, fork_threshold_tokens: int | None = None, source: str = "calls") -> Reconciled:
    """TRL's rows for one rollout (docs/reconcile.md, "TRL").

    Args:
        fork_threshold_tokens: ``AsyncGRPOConfig.fork_threshold_tokens``; None takes TRL's default
            for the source (1024 for its own loop, 0 for the OpenEnv harness's lossless capture).
        source: ``calls`` (TRL's own loop: every call with prompt ids, in arrival order) or
            ``openenv`` (the OpenEnv harness: OpenEnv's agent turns).
    """
    if source not in SOURCES:
        raise ValueError(f"unknown TRL source {source!r} (known: {', '.join(SOURCES)})")
    threshold = (
        (DEFAULT_FORK_THRESHOLD if source == "calls" else 0) if fork_threshold_tokens is None else fork_threshold_tokens
    )
    params = {"fork_threshold_tokens": threshold, "source": source}
    reasons: dict[int, str] = {}
    events: list[tuple[str, list[int], int, int | None]] = []
    if source == "openenv":
        from rollout_graph.analysis.reconcile.openenv import training_turns

        turns, error = training_turns(rollout)
        if error is not None:
            fates = call_fates(rollout, [], {i: error for i in range(len(rollout.calls))})
            return Reconciled("trl", params, [], fates, {"turns": 0}, error=error, events=[("error", [], 0, None)])
        chosen = set(turns)
        for i in range(len(rollout.calls)):
            if i not in chosen:
                reasons[i] = "not an agent turn OpenEnv's training trace selects"
    else:
        turns = [i for i, c in enumerate(rollout.calls) if c.prompt_ids is not None]
        for i, c in enumerate(rollout.calls):
            if c.prompt_ids is None:
                reasons[i] = "no prompt ids: not a turn TRL can record"
    try:
        result = chain_to_rows(rollout, turns, threshold)
    except LogprobsMissing as exc:
        error = f"TRL raises ValueError: {exc} (no rows are built for the rollout)"
        fates = call_fates(rollout, [], {i: error for i in range(len(rollout.calls))})
        return Reconciled("trl", params, [], fates, {"turns": len(turns)}, error=error, events=[("error", [], 0, None)])
    for prev, k, kind, drift, masked in result.transitions:
        if kind == REALIGN and drift:
            reasons.setdefault(
                prev,
                f"realigned as context: {rollout.calls[k].node_id}'s prompt drifts {drift:,} tokens inside "
                f"{rollout.calls[prev].node_id}'s reply (under fork_threshold_tokens {threshold:,})",
            )
            events.append(("realign", [prev, k], masked, k))
        elif kind == FORK:
            events.append(("fork", [prev, k], drift, k))
    kept = {s.call for row in result.rows for s in row.segments if s.part == OUTPUT}
    for k in turns:
        if k not in kept and rollout.calls[k].n_sampled:
            reasons.setdefault(k, "in no row with a trained token")
    fates = call_fates(rollout, result.rows, reasons)
    notes = {"turns": len(turns), "sequences": len(result.rows), "tally": result.tally}
    return Reconciled("trl", params, result.rows, fates, notes, events=events)
