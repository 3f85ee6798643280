"""Fidelity grades and training steps: what a record's source can support, and where in a run it sits.

Every call carries a grade in ``call.claims["fidelity"]`` (set by the reader that made it, or
inferred from what the call holds); a rollout's grade is its lowest call's. The grades, best first
(docs/formats.md, "Fidelity"):

- ``tokens+logprobs``: token ids and the engine's logprobs: exact linking, heatmaps, training rows.
- ``tokens``: ids without logprobs: exact linking, but no heatmap and nothing trainable.
- ``sequences``: already-flattened training rows (ids, loss mask, logprobs, trainer signals): each
  row is shown, calls are its loss-mask runs; the DAG across rows cannot be rebuilt.
- ``messages``: chat messages without ids: linked by the message rules; tokens only with a
  tokenizer (re-tokenized, so a broken replay cannot be seen).
- ``text``: prompt and completion strings: one call per record, no ids, no structure.

The step comes from a record's own ``step`` field, else from the path (``step_12/``,
``global_step_12``, ``train_data_step12.jsonl``, ``completions_00012.parquet``, ``12.jsonl``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import PurePath
from typing import Any

import numpy as np

from rollout_graph.core.records import WARN, Call

TOKENS_LOGPROBS = "tokens+logprobs"
TOKENS = "tokens"
SEQUENCES = "sequences"
MESSAGES = "messages"
TEXT = "text"
GRADES = (TOKENS_LOGPROBS, TOKENS, SEQUENCES, MESSAGES, TEXT)  # best first

RULES_OUT = {
    TOKENS_LOGPROBS: "",
    TOKENS: "no logprobs: no token heatmap, no trainer-vs-inference figures, no call is trainable",
    SEQUENCES: (
        "already-flattened training rows: the call graph across rows cannot be rebuilt (no forks, "
        "retries or near misses between rows); calls are the rows' loss-mask runs"
    ),
    MESSAGES: (
        "no token ids: calls are linked by the message rules; tokens only with a tokenizer "
        "(re-tokenized), so broken replays and logprobs cannot be seen"
    ),
    TEXT: (
        "prompt and completion strings only: no token ids, no logprobs, no message structure; "
        "one call per record, nothing to link"
    ),
}

_STEP_PATTERNS = (
    re.compile(r"^(?:global_)?step[_-]?(\d+)(?:_evals)?$"),
    re.compile(r"^(?:train|val)_data_step(\d+)$"),
    re.compile(r"^completions_(\d+)$"),
    re.compile(r"^(\d+)$"),
)
_SUFFIXES = (".gz", ".zst", ".jsonl", ".json", ".ndjson", ".parquet")


def _stem(name: str) -> str:
    for suffix in _SUFFIXES:
        name = name.removesuffix(suffix)
    return name


MAX_STEP = 2**63 - 1  # a step is a non-negative 64-bit integer: the audit table's column, JSON readers


def _step_value(value: Any) -> tuple[int | None, str | None]:
    """A step field's value: (the step, None), (None, why it is refused) or (None, None) when it is
    not a step at all (absent, negative, fractional, text that is not digits)."""
    if type(value) is float:
        if not (value.is_integer() and value >= 0):
            return None, None
        if value > MAX_STEP:  # orjson reads an integer beyond 64 bits as a float
            return None, f"{value:.4g} is beyond 64 bits"
        return int(value), None
    if isinstance(value, str):
        # ASCII digits only ("²".isdigit() is true), compared by length before int() reads it
        # (int() refuses more than 4,300 digits): TRL logs the step as a string
        if not (value.isascii() and value.isdigit()):
            return None, None
        digits = value.lstrip("0") or "0"
        if len(digits) > 19 or int(digits) > MAX_STEP:
            shown = digits if len(digits) <= 30 else f"{digits[:20]}… ({len(digits):,} digits)"
            return None, f"{shown!r} is beyond 64 bits"
        return int(digits), None
    if type(value) is int and value >= 0:
        if value > MAX_STEP:
            return None, f"{value if value < 10**30 else f'{value:.4g}'} is beyond 64 bits"
        return value, None
    return None, None


@lru_cache(maxsize=1024)
def _path_step(source: str) -> tuple[int | None, str | None]:
    parts = PurePath(source).parts
    for k, part in enumerate(reversed(parts)):
        name = _stem(part) if k == 0 else part
        for pattern in _STEP_PATTERNS:
            m = pattern.match(name)
            if m and (k == 0 or pattern.pattern != r"^(\d+)$") and m.group(1).isascii():
                step, reason = _step_value(m.group(1))
                return step, None if reason is None else f"the step its path names, {reason}"
    return None, None


def step_from_path(source: str) -> int | None:
    """The training step a file's path names (the nearest path part that names one), or None
    (also for a step beyond 64 bits: :func:`step_problem` says so). Cached: every record of a file
    asks for its path."""
    return _path_step(source)[0]


def step_of(record: dict) -> int | None:
    """A record's own ``step`` (or ``global_step``) field, when it is a non-negative integer of at
    most 64 bits (a string of ASCII digits too: TRL logs the step as a string); else None."""
    for key in ("step", "global_step"):
        step, _ = _step_value(record.get(key))
        if step is not None:
            return step
    return None


def step_problem(record: dict, source: str) -> str | None:
    """Why the record's step (its own field, else its path's) is refused, or None: a step beyond
    64 bits is not used (the rollout is placed on no step) and its calls say so (docs/limits.md)."""
    for key in ("step", "global_step"):
        step, reason = _step_value(record.get(key))
        if step is not None:
            return None
        if reason is not None:
            return f"{key} {reason} (more than {MAX_STEP:,}); the call is placed on no training step"
    step, reason = _path_step(source)
    return None if reason is None else f"{reason} (more than {MAX_STEP:,}); the call is placed on no training step"


def grade_of(call: Call) -> str:
    """A call's fidelity: what its reader said, else what it holds."""
    said = call.claims.get("fidelity")
    if said in GRADES:
        return str(said)
    if call.prompt_ids is not None:
        return TOKENS_LOGPROBS if call.logprobs_aligned else TOKENS
    if call.request_messages or call.response_message:
        return MESSAGES
    return TEXT


def rollout_grade(calls: Iterable[Call]) -> str:
    """The lowest grade among a rollout's calls (``text`` when it has none)."""
    worst = 0
    seen = False
    for call in calls:
        seen = True
        worst = max(worst, GRADES.index(grade_of(call)))
    return GRADES[worst] if seen else TEXT


def rollout_step(calls: Iterable[Call]) -> int | None:
    """The step of a rollout: its first call's that names one (a non-negative 64-bit integer)."""
    for call in calls:
        step = call.claims.get("step")
        if type(step) is int and 0 <= step <= MAX_STEP:
            return step
    return None


def rollout_format(calls: Iterable[Call]) -> str | None:
    """The framework format a rollout was read from (``claims["format"]``), if a framework reader made it."""
    for call in calls:
        fmt = call.claims.get("format")
        if isinstance(fmt, str):
            return fmt
    return None


def fidelity_json(calls: list[Call]) -> dict[str, Any]:
    """``{"grade", "rules_out", "format", "step"}`` for ``inspect --json`` and the app."""
    grade = rollout_grade(calls)
    return {
        "grade": grade,
        "rules_out": RULES_OUT[grade] or None,
        "format": rollout_format(calls),
        "step": rollout_step(calls),
    }


def fidelity_text(detail: dict[str, Any]) -> str:
    """One line for the human ``inspect``: the grade, what it rules out, format and step."""
    parts = [f"fidelity {detail['grade']}"]
    if detail.get("format"):
        parts.append(str(detail["format"]))
    if detail.get("step") is not None:
        parts.append(f"step {detail['step']}")
    text = " · ".join(parts)
    return text + (f" (rules out: {detail['rules_out']})" if detail.get("rules_out") else "")


def stamp_step(calls: list[Call], record: dict, source: str) -> None:
    """Give every call without one the record's step (its own field, else its path's); a step
    refused (beyond 64 bits) is a WARN ``malformed_field`` on each call instead."""
    step = step_of(record)
    if step is None:
        step = step_from_path(source)
    if step is None:
        problem = step_problem(record, source)
        if problem is not None:
            for call in calls:
                if "step" not in call.claims:
                    call.add_issue(WARN, "malformed_field", problem)
        return
    for call in calls:
        call.claims.setdefault("step", step)


# --- flattened training rows -> calls ---------------------------------------------------------


def mask_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The ``[start, end)`` runs of a boolean mask's true positions, in order."""
    m = np.asarray(mask, dtype=bool)
    if not m.any():
        return []
    padded = np.concatenate(([False], m, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def float_array(values: Any, length: int) -> np.ndarray | None:
    """A per-position list of numbers (``null`` allowed, read as NaN) of exactly ``length``, else None."""
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, list) or len(values) < length:
        return None
    out = np.full(length, np.nan)
    for i, v in enumerate(values[:length]):
        if type(v) is float:
            out[i] = v
        elif type(v) is int:  # beyond a float's range (a 400-digit integer): an infinity, never a crash
            out[i] = float(v) if abs(v) < 2**1023 else (np.inf if v > 0 else -np.inf)
        elif type(v) is bool:
            out[i] = float(v)
        elif v is not None:
            return None
    return out


def listed(values: np.ndarray | None) -> list[float | None] | None:
    """An array as a JSON list, NaN as null (claims survive the load cache as JSON)."""
    if values is None:
        return None
    return [None if not np.isfinite(v) else float(v) for v in values]
