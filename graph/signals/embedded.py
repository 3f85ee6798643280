"""Signals a trace carries itself: the trainer columns RL frameworks write beside the tokens.

prime-rl's token export, verifiers traces, NeMo-RL's train data and the text dumps of TRL, verl
and SkyRL hold trainer logprobs, advantages or rewards next to what the engine sampled. Their
readers keep them per call (``call.claims["signals"]``: arrays over the call's sampled span, the
reward, row metadata); this module turns them into the same :class:`SignalRow` objects a signals
file gives, one per training row, and joins them with :func:`rollout_graph.signals.join.join_rollout`,
so every figure (mean |Δ|, k3 KL, ratio outside the band, per-call mismatches) is the one the
project already computes (docs/signals.md).

prime-rl also writes its own per-token ``mismatch_kl`` (``exp(d) - d - 1``, the k3 term) and
``is_masked``: their means over the compared positions are kept beside ours (row metadata
``prime_rl_mismatch_kl``, ``prime_rl_masked_share``) and checked: a row whose ``mismatch_kl``
disagrees with our k3 gets a WARN ``trainer_figures_disagree``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from rollout_graph.core.records import WARN, Finding
from rollout_graph.core.rollout import Rollout
from rollout_graph.signals.join import DEFAULT_THRESHOLD, RolloutSignals, join_rollout
from rollout_graph.signals.reading import SignalRow

ARRAYS = ("trainer_logprobs", "advantages")
CHECKED = ("mismatch_kl", "is_masked")  # prime-rl's own figures, compared with ours
KL_TOLERANCE = (1e-4, 1e-3)  # absolute, relative: prime-rl exports float32


def has_embedded(rollout: Rollout) -> bool:
    """Whether any call of the rollout carries signals from its trace."""
    return any(isinstance(c.claims.get("signals"), dict) for c in rollout.calls)


def _fill(target: np.ndarray, begin: int, values: Any, n: int) -> bool:
    if not isinstance(values, list) or len(values) != n or begin + n > target.shape[0]:
        return False
    target[begin : begin + n] = [np.nan if v is None else float(v) for v in values]
    return True


def embedded_rows(rollout: Rollout) -> tuple[list[SignalRow], dict[str, dict[str, np.ndarray]]]:
    """One signals row per training row that has any embedded signal, and prime-rl's checked columns per leaf."""
    rows: list[SignalRow] = []
    checked: dict[str, dict[str, np.ndarray]] = {}
    for seq in rollout.sequences:
        leaf = rollout.calls[seq.leaf]
        found = [c for c in (rollout.calls[k] for k in seq.nodes) if isinstance(c.claims.get("signals"), dict)]
        if not found:
            continue
        tokens = rollout.tokens(seq)
        length = int(tokens.input_ids.shape[0])
        arrays = {name: np.full(length, np.nan) for name in (*ARRAYS, *CHECKED)}
        present = dict.fromkeys(arrays, False)
        reward: float | None = None
        extra: dict[str, Any] = {}
        for node, start in zip(seq.nodes, tokens.turn_starts, strict=True):
            call = rollout.calls[node]
            signals = call.claims.get("signals")
            if not isinstance(signals, dict):
                continue
            n = call.n_sampled
            begin = (
                int(start) + call.n_prompt - rollout.context_start(node) if call.prompt_ids is not None else int(start)
            )
            for name in arrays:
                if n and _fill(arrays[name], begin, signals.get(name), n):
                    present[name] = True
            value = signals.get("reward")
            if reward is None and isinstance(value, (int, float)) and math.isfinite(value):
                reward = float(value)
            for key, value in (signals.get("extra") or {}).items():
                if isinstance(value, (str, int, float, bool)):
                    extra.setdefault(str(key), value)
        fmt = leaf.claims.get("format")
        if isinstance(fmt, str):
            extra.setdefault("source_format", fmt)
        rows.append(
            SignalRow(
                session_id=rollout.session_id,
                leaf_id=leaf.node_id,
                line=leaf.line,
                trainer_logprobs=arrays["trainer_logprobs"] if present["trainer_logprobs"] else None,
                advantages=arrays["advantages"] if present["advantages"] else None,
                reward=reward,
                extra=extra,
            )
        )
        checked[leaf.node_id] = {name: arrays[name] for name in CHECKED if present[name]}
    return rows, checked


def _close(a: float, b: float) -> bool:
    absolute, relative = KL_TOLERANCE
    return abs(a - b) <= absolute + relative * max(abs(a), abs(b))


def join_embedded(rollout: Rollout, threshold: float = DEFAULT_THRESHOLD) -> RolloutSignals | None:
    """The rollout's embedded signals joined like a signals file's rows, prime-rl's figures checked; None without any."""
    rows, checked = embedded_rows(rollout)
    if not rows:
        return None
    signals = join_rollout(rollout, rows, threshold)
    for index, joined in signals.rows.items():
        seq = rollout.sequences[index]
        leaf_id = rollout.calls[seq.leaf].node_id
        theirs = checked.get(leaf_id) or {}
        if not theirs:
            continue
        mask = rollout.tokens(seq).loss_mask.astype(bool)
        if joined.row.trainer_logprobs is not None:
            mask &= np.isfinite(joined.row.trainer_logprobs)
        extra = dict(joined.row.extra)
        if "mismatch_kl" in theirs:
            values = theirs["mismatch_kl"][mask]
            values = values[np.isfinite(values)]
            if values.size:
                extra["prime_rl_mismatch_kl"] = float(values.mean())
                ours = joined.metrics.get("kl_k3")
                if ours is not None and not _close(float(values.mean()), ours):
                    signals.findings.append(
                        Finding(
                            WARN,
                            "trainer_figures_disagree",
                            f"prime-rl's mismatch_kl averages {values.mean():.4g} over this row's trained tokens, "
                            f"our k3 KL from its trainer and inference logprobs is {ours:.4g}",
                            node_id=leaf_id,
                            leaf_id=leaf_id,
                        )
                    )
        if "is_masked" in theirs:
            values = theirs["is_masked"][mask]
            values = values[np.isfinite(values)]
            if values.size:
                extra["prime_rl_masked_share"] = float(values.mean())
        signals.rows[index] = dataclasses.replace(joined, row=dataclasses.replace(joined.row, extra=extra))
    return signals


def attach_embedded(rollout: Rollout, threshold: float = DEFAULT_THRESHOLD) -> Rollout:
    """The rollout with its embedded signals joined (unchanged when it carries none)."""
    if not has_embedded(rollout):
        return rollout
    signals = join_embedded(rollout, threshold)
    if signals is None:
        return rollout
    return dataclasses.replace(rollout, findings=[*rollout.findings, *signals.findings], signals=signals)
