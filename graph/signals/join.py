"""Join a signals file to analysed rollouts and compute trainer-vs-inference figures.

Everything is computed over the loss-mask-1 positions of each joined row where the trainer gave a
finite logprob, with ``d = trainer_logprob - inference_logprob`` (docs/signals.md). Rows are
visited in the rollout's leaf order, never in file order, so a permutation of the signals file
changes nothing. A row that does not fit the row it names is reported (FATAL
``signals_misaligned``) and ignored whole: nothing is ever truncated or padded to fit.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rollout_graph.core.records import FATAL, WARN, Finding
from rollout_graph.core.roles import main_sequence
from rollout_graph.core.rollout import Rollout
from rollout_graph.signals.corrections import Correction, Evaluation, divergence, evaluate
from rollout_graph.signals.reading import SignalRow, SignalsFile

DEFAULT_THRESHOLD = 1.0  # nats: a call whose sampled tokens differ by more is a logprob_mismatch
RATIO_BAND = (0.8, 1.2)  # importance ratios outside this band are counted
WORST_K = 10  # the largest |d| tokens each rollout reports (``worst_tokens``)


def mismatch_metrics(d: np.ndarray) -> dict[str, Any]:
    """``n_tokens``, ``mean_abs_diff``, ``max_abs_diff``, ``kl_k3`` and ``ratio_outside_share`` of ``d``.

    ``d`` holds trainer minus inference logprobs at the compared positions; the k3 estimator
    ``mean(exp(d) - 1 - d)`` estimates KL(inference || trainer) from tokens the inference engine
    sampled. Every figure is ``None`` when nothing was compared.
    """
    n = int(d.shape[0])
    if n == 0:
        return {"n_tokens": 0, "mean_abs_diff": None, "max_abs_diff": None, "kl_k3": None, "ratio_outside_share": None}
    ratio = np.exp(d)
    absd = np.abs(d)
    outside = (ratio < RATIO_BAND[0]) | (ratio > RATIO_BAND[1])
    return {
        "n_tokens": n,
        "mean_abs_diff": float(absd.mean()),
        "max_abs_diff": float(absd.max()),
        "kl_k3": float(np.mean(ratio - 1.0 - d)),
        "ratio_outside_share": float(outside.mean()),
    }


@dataclass(slots=True)
class CallSignals:
    """The trainer's view of one call's sampled span.

    ``trainer`` and ``advantages`` come from the joined row covering the call that holds its worst
    token (the largest trainer-vs-inference difference; the first row in leaf order on a tie or
    when no row compares logprobs; NaN where not compared), so the token view and the scatter show
    the token a ``logprob_mismatch`` finding names. The figures pool every joined row that covers
    it. ``sequence`` is that row's sequence index, ``worst_offset`` the worst token's index in the
    sampled span (None when nothing was compared).
    """

    trainer: np.ndarray
    advantages: np.ndarray | None
    n_tokens: int
    mean_abs_diff: float | None
    max_abs_diff: float | None
    sequence: int = (
        -1
    )  # the joined row ``trainer`` comes from (index into rollout.sequences): the one with the call's worst token
    begin: int = 0  # where the call's sampled span starts in that row
    worst_offset: int | None = None  # the worst token's offset in the call's sampled span
    worst_abs_diff: float = -1.0

    def as_dict(self) -> dict[str, Any]:
        """The figures as ``inspect --json`` prints them under a node's ``signals``."""
        return {"n_tokens": self.n_tokens, "mean_abs_diff": self.mean_abs_diff, "max_abs_diff": self.max_abs_diff}


@dataclass(slots=True)
class RowSignals:
    """One joined row: the signals row, the sequence it names, its figures."""

    sequence: int  # index into rollout.sequences
    row: SignalRow
    metrics: dict[str, Any]
    mean_advantage: float | None
    d: np.ndarray = field(default_factory=lambda: np.empty(0))  # per position of the row; NaN = not compared

    def as_dict(self, leaf_id: str) -> dict[str, Any]:
        """The row as ``inspect --json`` prints it under ``signals.rows``."""
        return {
            "leaf_id": leaf_id,
            "reward": self.row.reward,
            **self.metrics,
            "mean_advantage": self.mean_advantage,
            "has_trainer_logprobs": self.row.trainer_logprobs is not None,
            "has_advantages": self.row.advantages is not None,
            "extra": dict(self.row.extra),
        }


@dataclass(slots=True)
class RolloutSignals:
    """Everything the signals say about one rollout."""

    threshold: float
    rows: dict[int, RowSignals] = field(default_factory=dict)  # by sequence index
    calls: dict[int, CallSignals] = field(default_factory=dict)  # by arrival index
    metrics: dict[str, Any] = field(default_factory=dict)
    reward: float | None = None
    mean_advantage: float | None = None
    n_rows_ignored: int = 0
    findings: list[Finding] = field(default_factory=list)
    corrections: Evaluation | None = None  # the corrections chosen at join time (--correction)
    worst: list[dict[str, Any]] = field(default_factory=list)  # the WORST_K largest |d| tokens
    # every joined row covering a call: arrival index -> [(sequence index, where its sampled span
    # starts in that row)], leaf order (the app's row picker offers them; ``calls`` holds the default)
    spans: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    memo: dict[tuple[str, ...], Evaluation] = field(default_factory=dict, repr=False)

    def evaluate(self, corrections: list[Correction]) -> Evaluation:
        """The corrections applied to every joined row (keyed by sequence index), memoised."""
        key = tuple(c.label for c in corrections)
        if key not in self.memo:
            self.memo[key] = evaluate(corrections, ((i, self.rows[i].d) for i in sorted(self.rows)))
        return self.memo[key]

    @property
    def has_trainer_logprobs(self) -> bool:
        """True when some joined row carries trainer logprobs."""
        return any(r.row.trainer_logprobs is not None for r in self.rows.values())

    @property
    def has_advantages(self) -> bool:
        """True when some joined row carries advantages."""
        return any(r.row.advantages is not None for r in self.rows.values())

    def summary(self) -> dict[str, Any]:
        """The per-rollout figures (``inspect --json`` ``signals`` without its rows)."""
        return {
            "reward": self.reward,
            **self.metrics,
            "mean_advantage": self.mean_advantage,
            "n_rows": len(self.rows),
            "n_rows_ignored": self.n_rows_ignored,
            "n_mismatch_calls": sum(1 for f in self.findings if f.code == "logprob_mismatch"),
            "threshold": self.threshold,
            "worst_tokens": list(self.worst),
            **(
                {}
                if self.corrections is None
                else {
                    "corrections": self.corrections.as_list(),
                    "corrections_disagree": self.corrections.disagreements(),
                }
            ),
        }

    def as_dict(self, rollout: Rollout) -> dict[str, Any]:
        """The session's ``signals`` object of ``inspect --json`` (docs/cli.md)."""
        rows = [self.rows[i].as_dict(rollout.calls[rollout.sequences[i].leaf].node_id) for i in sorted(self.rows)]
        return {**self.summary(), "rows": rows}


def _listed(values: np.ndarray | None) -> list[float | None] | None:
    return None if values is None else [None if not np.isfinite(v) else float(v) for v in values]


def row_columns(signals: RolloutSignals, sequence: int) -> dict[str, Any]:
    """The columns ``export --signals`` adds to a training row (all ``None`` when not joined).

    With corrections chosen (``--correction``), ``correction_labels`` lists their labels and
    ``correction_weights`` holds, in the same order, one weight per position of the row: the weight
    the correction gives that token (0 where it masks), ``null`` where nothing was compared
    (loss-mask-0 positions, no trainer logprob); the whole list is ``null`` for a row without a
    joined signals row. Lists of lists, so Parquet keeps them as lists.
    """
    joined = signals.rows.get(sequence)
    out: dict[str, Any]
    if joined is None:
        out = {"reward": None, "trainer_logprobs": None, "advantages": None, "signals_meta": None}
    else:
        row = joined.row
        out = {
            "reward": row.reward,
            "trainer_logprobs": _listed(row.trainer_logprobs),
            "advantages": _listed(row.advantages),
            "signals_meta": dict(row.extra),
        }
    if signals.corrections is not None:
        results = signals.corrections.rows
        chosen = signals.corrections.corrections
        out["correction_labels"] = [c.label for c in chosen]
        out["correction_weights"] = [
            None if sequence not in results[c.label] else _listed(results[c.label][sequence].weights) for c in chosen
        ]
    return out


def _misaligned(leaf_id: str | None, node_id: str | None, detail: str) -> Finding:
    return Finding(FATAL, "signals_misaligned", detail + "; its signals are ignored", node_id=node_id, leaf_id=leaf_id)


def _same(a: SignalRow, b: SignalRow) -> bool:
    def eq(x: np.ndarray | None, y: np.ndarray | None) -> bool:
        if x is None or y is None:
            return x is y
        return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=True))

    return (
        a.reward == b.reward
        and eq(a.trainer_logprobs, b.trainer_logprobs)
        and eq(a.advantages, b.advantages)
        and a.extra == b.extra
    )


def _check(row: SignalRow, length: int, input_ids: np.ndarray | None) -> str | None:
    for name in ("trainer_logprobs", "advantages"):
        values = getattr(row, name)
        if values is not None and values.shape[0] != length:
            return f"{name} has {values.shape[0]} values for a row of {length} positions"
    if row.input_ids is not None and input_ids is not None:
        if row.input_ids.shape[0] != length or not np.array_equal(row.input_ids, input_ids):
            return "its input_ids differ from the row it names"
    return None


def join_rollout(
    rollout: Rollout,
    rows: list[SignalRow],
    threshold: float = DEFAULT_THRESHOLD,
    corrections: list[Correction] | tuple[Correction, ...] = (),
) -> RolloutSignals:
    """Join one rollout's signals rows (any order) and compute its figures, findings and the
    chosen ``corrections`` (docs/corrections.md)."""
    out = RolloutSignals(threshold=threshold)
    by_key: dict[str, list[SignalRow]] = defaultdict(list)
    for row in rows:
        by_key[row.leaf_id].append(row)
    leaf_ids = {rollout.calls[s.leaf].node_id: i for i, s in enumerate(rollout.sequences)}
    problems: list[Finding] = []
    for leaf_id in sorted(set(by_key) - set(leaf_ids)):
        n = len(by_key[leaf_id])
        problems.append(
            _misaligned(None, None, f"{n} signals row(s) name leaf {leaf_id!r}, which is no row of this rollout")
        )
        out.n_rows_ignored += n
    per_call_d: dict[int, list[np.ndarray]] = defaultdict(list)
    all_d: list[np.ndarray] = []
    worst: list[dict[str, Any]] = []
    all_adv: list[np.ndarray] = []
    for i, seq in enumerate(rollout.sequences):
        leaf_id = rollout.calls[seq.leaf].node_id
        found = by_key.get(leaf_id)
        if not found:
            continue
        if any(not _same(found[0], other) for other in found[1:]):
            problems.append(_misaligned(leaf_id, leaf_id, f"{len(found)} different signals rows name leaf {leaf_id}"))
            out.n_rows_ignored += len(found)
            continue
        row = found[0]
        length = seq.n_trainable + seq.n_context
        needs_tokens = row.trainer_logprobs is not None or row.advantages is not None or row.input_ids is not None
        tokens = rollout.tokens(seq) if needs_tokens else None
        problem = _check(row, length, None if tokens is None else tokens.input_ids)
        if problem is not None:
            problems.append(
                _misaligned(leaf_id, leaf_id, f"signals row for leaf {leaf_id} (line {row.line}): {problem}")
            )
            out.n_rows_ignored += len(found)
            continue
        mask = np.zeros(length, dtype=bool) if tokens is None else tokens.loss_mask.astype(bool)
        d = np.empty(0)
        d_full = np.full(length, np.nan)
        compared = np.zeros(length, dtype=bool)
        if row.trainer_logprobs is not None and tokens is not None:
            # an inference logprob the engine did not record (NaN) is not compared either
            compared = mask & np.isfinite(row.trainer_logprobs) & ~np.isnan(tokens.logprobs)
            d = row.trainer_logprobs[compared] - tokens.logprobs[compared]
            d_full[compared] = d
            all_d.append(d)
            worst += _worst(rollout, seq, tokens.turn_starts, tokens.logprobs, d_full)
        mean_adv = None
        if row.advantages is not None:
            adv = row.advantages[mask & np.isfinite(row.advantages)]
            all_adv.append(adv)
            mean_adv = float(adv.mean()) if adv.size else None
        out.rows[i] = RowSignals(i, row, {**mismatch_metrics(d), **divergence(d)}, mean_adv, d_full)
        if tokens is not None:
            _per_call(rollout, i, seq, tokens.turn_starts, tokens.logprobs, row, compared, per_call_d, out)
    for node, parts in sorted(per_call_d.items()):
        d = np.concatenate(parts)
        call = out.calls[node]
        m = mismatch_metrics(d)
        call.n_tokens, call.mean_abs_diff, call.max_abs_diff = m["n_tokens"], m["mean_abs_diff"], m["max_abs_diff"]
        if call.max_abs_diff is not None and call.max_abs_diff > threshold:
            node_id = rollout.calls[node].node_id
            problems.append(
                Finding(
                    WARN,
                    "logprob_mismatch",
                    f"trainer and inference logprobs differ by up to {call.max_abs_diff:.3g} nats "
                    f"(mean {call.mean_abs_diff:.3g}) over {call.n_tokens} sampled tokens; threshold {threshold:g}"
                    + worst_words(rollout, out, node),
                    node_id=node_id,
                )
            )
    pooled = np.concatenate(all_d) if all_d else np.empty(0)
    out.metrics = {**mismatch_metrics(pooled), **divergence(pooled)}
    # leaf order, then position: ties keep the first row's token
    out.worst = sorted(worst, key=lambda w: -abs(w["d"]))[:WORST_K]
    if corrections:
        out.corrections = out.evaluate(list(corrections))
    advantages = np.concatenate(all_adv) if all_adv else np.empty(0)
    out.mean_advantage = float(advantages.mean()) if advantages.size else None
    out.reward = _rollout_reward(rollout, out)
    out.findings = problems
    return out


def row_name(rollout: Rollout, signals: RolloutSignals, sequence: int) -> str:
    """How a joined row is named to a user: its leaf, and the signals file line it came from
    (``row c2 (mine.signals.jsonl line 2)``)."""
    leaf_id = rollout.calls[rollout.sequences[sequence].leaf].node_id
    joined = signals.rows.get(sequence)
    if joined is None:
        return f"row {leaf_id}"
    where = f"{joined.row.file.replace(chr(92), '/').rsplit('/', 1)[-1]} line {joined.row.line}".strip()
    return f"row {leaf_id} ({where})"


def worst_words(rollout: Rollout, signals: RolloutSignals, node: int) -> str:
    """``; the worst is sampled token 1 (Δ -2.5 nats), in row c2 (f.jsonl line 2) at position 4``:
    where a call's worst token is (empty when nothing was compared)."""
    call = signals.calls.get(node)
    if call is None or call.worst_offset is None:
        return ""
    d = signals.rows[call.sequence].d[call.begin + call.worst_offset]
    return (
        f"; the worst is sampled token {call.worst_offset} (Δ {d:+.3g} nats), in "
        f"{row_name(rollout, signals, call.sequence)} at position {call.begin + call.worst_offset}"
    )


def _worst(
    rollout: Rollout, seq: Any, turn_starts: np.ndarray, inference: np.ndarray, d_full: np.ndarray
) -> list[dict[str, Any]]:
    """The row's WORST_K largest |d| tokens: leaf, position in the row, the call, both logprobs."""
    scored = np.where(np.isnan(d_full), -1.0, np.abs(d_full))
    if scored.shape[0] > WORST_K:  # the K largest without sorting the whole row; ties: the first positions
        kth = np.partition(scored, scored.shape[0] - WORST_K)[scored.shape[0] - WORST_K]
        candidates = np.flatnonzero(scored >= kth)
    else:
        candidates = np.arange(scored.shape[0])
    top = candidates[np.argsort(-scored[candidates], kind="stable")][:WORST_K]
    leaf_id = rollout.calls[seq.leaf].node_id
    out = []
    for pos in top:
        if scored[pos] < 0:
            break
        node = seq.nodes[max(0, int(np.searchsorted(turn_starts, pos, side="right")) - 1)]
        d = float(d_full[pos])
        out.append(
            {
                "leaf_id": leaf_id,
                "position": int(pos),
                "node_id": rollout.calls[node].node_id,
                "d": d,
                "inference_logprob": float(inference[pos]),
                "trainer_logprob": float(inference[pos]) + d,
            }
        )
    return out


def _per_call(
    rollout: Rollout,
    sequence: int,
    seq: Any,
    turn_starts: np.ndarray,
    inference: np.ndarray,
    row: SignalRow,
    compared: np.ndarray,
    per_call_d: dict[int, list[np.ndarray]],
    out: RolloutSignals,
) -> None:
    """Each call's sampled span in this row: its differences, and its arrays for the token view
    (from the row holding the call's worst token)."""
    for node, start in zip(seq.nodes, turn_starts, strict=True):
        call = rollout.calls[node]
        n = call.n_sampled
        if not n:
            continue
        begin = int(start) + call.n_prompt - rollout.context_start(node) if call.prompt_ids is not None else int(start)
        span = slice(begin, begin + n)
        out.spans.setdefault(node, []).append((sequence, begin))
        worst, worst_at = -1.0, None
        if row.trainer_logprobs is not None:
            here = compared[span]
            if here.any():
                d = row.trainer_logprobs[span][here] - inference[span][here]
                per_call_d[node].append(d)
                k = int(np.argmax(np.abs(d)))
                worst, worst_at = float(abs(d[k])), int(np.flatnonzero(here)[k])
        kept = out.calls.get(node)
        if kept is None or worst > kept.worst_abs_diff:
            trainer = np.full(n, np.nan)
            if row.trainer_logprobs is not None:
                trainer = np.where(compared[span], row.trainer_logprobs[span], np.nan)
            advantages = None if row.advantages is None else row.advantages[span].copy()
            out.calls[node] = CallSignals(trainer, advantages, 0, None, None, sequence, begin, worst_at, worst)


def _rollout_reward(rollout: Rollout, out: RolloutSignals) -> float | None:
    """The main row's reward; without one, the mean over the joined rows that have one."""
    if not rollout.sequences:
        return None
    main = rollout.sequences.index(main_sequence(rollout.sequences))
    if main in out.rows and out.rows[main].row.reward is not None:
        return out.rows[main].row.reward
    rewards = [r.row.reward for _, r in sorted(out.rows.items()) if r.row.reward is not None]
    return float(np.mean(rewards)) if rewards else None


@dataclass(slots=True)
class JoinReport:
    """What happened to the file's rows: joined, ignored, or for sessions that were not loaded."""

    file: dict[str, Any]
    unmatched_sessions: list[str]
    n_unmatched_rows: int

    def as_dict(self) -> dict[str, Any]:
        """``inspect --json``'s ``signals_load``."""
        return {
            **self.file,
            "unmatched_sessions": self.unmatched_sessions,
            "n_unmatched_rows": self.n_unmatched_rows,
        }


def attach(rollout: Rollout, signals: RolloutSignals) -> Rollout:
    """A copy of the rollout carrying the signals and their findings (sequences are unchanged)."""
    return dataclasses.replace(rollout, findings=[*rollout.findings, *signals.findings], signals=signals)


def with_corrections(rollouts: list[Rollout], corrections: list[Correction] | tuple[Correction, ...]) -> list[Rollout]:
    """The rollouts whose signals came from their own trace (prime-rl, NeMo-RL, verifiers ...: the
    embedded trainer columns) with the ``corrections`` applied; rollouts without signals unchanged."""
    if not corrections:
        return rollouts
    out = []
    for r in rollouts:
        if r.signals is not None:
            signals = dataclasses.replace(r.signals)
            signals.corrections = signals.evaluate(list(corrections))
            r = dataclasses.replace(r, signals=signals)
        out.append(r)
    return out


def attach_all(
    rollouts: list[Rollout],
    signals: SignalsFile,
    threshold: float = DEFAULT_THRESHOLD,
    corrections: list[Correction] | tuple[Correction, ...] = (),
) -> tuple[list[Rollout], JoinReport]:
    """Join a signals file to every rollout (with the chosen ``corrections``); rows for sessions not
    among them are only counted."""
    by_session: dict[str, list[SignalRow]] = defaultdict(list)
    for row in signals.rows:
        by_session[row.session_id].append(row)
    loaded = {r.session_id for r in rollouts}
    unmatched = sorted(set(by_session) - loaded)
    joined = [attach(r, join_rollout(r, by_session.get(r.session_id, []), threshold, corrections)) for r in rollouts]
    report = JoinReport(signals.report(), unmatched, sum(len(by_session[s]) for s in unmatched))
    return joined, report
