"""Turning JSON token lists into validated numpy arrays.

Validation never drops a position: an invalid id becomes -1 and an invalid logprob NaN, so spans
keep their lengths and the graph keeps its shape, while the problem is reported as a finding.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from graph.records import TopK

INVALID_ID = -1
_INT32_MAX = np.iinfo(np.int32).max
_TOKEN_ID_TEXT = re.compile(r"token_id:(-?\d+)\Z")


@dataclass(slots=True)
class Problems:
    """Finding-ready messages collected while converting one record."""

    invalid_ids: list[str] = field(default_factory=list)
    invalid_logprobs: list[str] = field(default_factory=list)
    positive_logprobs: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)


def _describe(values: list, bad: list[int], what: str) -> str:
    first = bad[0]
    more = f" ({len(bad)} positions)" if len(bad) > 1 else ""
    return f"{what}[{first}] = {values[first]!r}{more}"


def _valid_id(value) -> bool:
    return type(value) is int and 0 <= value < 2**63


def token_ids(value, what: str, problems: Problems, may_hold_bools: bool = True) -> np.ndarray | None:
    """Convert a JSON list of token ids; ``None`` when the field is absent or not a list.

    ``may_hold_bools`` lets callers skip the per-element type scan when the raw record has no
    ``true``/``false`` literal at all (numpy would silently read ``true`` as token 1).
    """
    if value is None:
        return None
    if not isinstance(value, list):
        problems.malformed.append(f"{what} is a {type(value).__name__}, not a list")
        return None
    if not value:
        return np.empty(0, dtype=np.int32)
    try:
        arr = np.array(value)
    except (ValueError, OverflowError):
        arr = np.array(value, dtype=object)
    clean = arr.dtype.kind == "i" and not (may_hold_bools and bool in set(map(type, value)))
    if clean and int(arr.min()) >= 0:
        if int(arr.max()) <= _INT32_MAX:
            return arr.astype(np.int32)
        return arr.astype(np.int64)
    # Slow path: mixed types, negatives, bools or ids beyond int64.
    bad = [i for i, v in enumerate(value) if not _valid_id(v)]
    if bad:
        problems.invalid_ids.append(_describe(value, bad, what))
    out = np.array([v if _valid_id(v) else INVALID_ID for v in value], dtype=np.int64)
    return out.astype(np.int32) if int(out.max()) <= _INT32_MAX else out


def _valid_logprob(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def logprobs(values: list, what: str, problems: Problems) -> np.ndarray:
    """Convert logprob values; invalid ones become NaN and are reported."""
    arr = np.full(len(values), np.nan, dtype=np.float64)
    bad: list[int] = []
    for i, v in enumerate(values):
        if _valid_logprob(v):
            arr[i] = v
        else:
            bad.append(i)
    if bad:
        problems.invalid_logprobs.append(_describe(values, bad, what))
    positive = np.flatnonzero(arr > 0)
    if positive.size:
        problems.positive_logprobs.append(_describe(values, positive.tolist(), what))
    return arr


def parse_token_id_text(token) -> int | None:
    """``"token_id:123"`` -> 123 (vLLM's ``return_tokens_as_token_ids``); anything else -> None."""
    if isinstance(token, str):
        m = _TOKEN_ID_TEXT.match(token)
        if m:
            return int(m.group(1))
    return None


Alternative = tuple  # (token id or None, token text or None, logprob)


def top_k(positions: list[list[Alternative] | None]) -> TopK | None:
    """Pack per-position alternatives into a :class:`~graph.records.TopK`; None if none recorded."""
    width = max((len(p) for p in positions if p), default=0)
    if width == 0:
        return None
    ids = np.full((len(positions), width), INVALID_ID, dtype=np.int64)
    lps = np.full((len(positions), width), np.nan, dtype=np.float32)
    texts: list[list[str]] | None = None
    for i, alternatives in enumerate(positions):
        for j, (token_id, text, logprob) in enumerate(alternatives or ()):
            if type(token_id) is int and token_id >= 0:
                ids[i, j] = token_id
            if _valid_logprob(logprob):
                lps[i, j] = logprob
            if text is not None:
                if texts is None:
                    texts = [[] for _ in positions]
                row = texts[i]
                row.extend([""] * (j - len(row)))
                row.append(str(text))
    return TopK(ids=ids, logprobs=lps, texts=texts)


def id_or_text(token) -> tuple[int | None, str | None]:
    """Split a logprob entry's token into (id, None) for ``token_id:N`` or (None, text)."""
    token_id = parse_token_id_text(token)
    if token_id is not None:
        return token_id, None
    return None, None if token is None else str(token)
