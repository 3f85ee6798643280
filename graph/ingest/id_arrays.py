"""Fast path for the big token-id arrays in a raw JSON line.

Every call's ``prompt_token_ids`` repeats the whole context, so a rollout's prompts add up to tens
of millions of ids, nearly all of them the previous prompt again. Before the line goes to the JSON
parser, each plain array of digits under a prompt-ids key is cut out and parsed with numpy; when
a recently seen array's text is a prefix of it, only the new tail is parsed. Anything unusual in
the array (a sign, a decimal point, a string, ``true``) leaves it in the line for the ordinary,
validating path. The cut is replaced by a marker string that :func:`restore` swaps for the array.
"""

from __future__ import annotations

import os
import re
import warnings
from bisect import bisect_right
from typing import Any

import numpy as np

from rollout_graph.ingest.limits import LimitExceeded
from rollout_graph.ingest.typed import FileRef, columns_for, cut_logprobs, located_span

# Keys whose arrays are large and repetitive: prompts, and rollout documents' sequences. One scan
# for their common tail finds both.
_TAIL = b'_ids"'
_HEADS = (b'"prompt_token', b'"input')
_OPENING = re.compile(rb"\s*:\s*\[")
_PLAIN = b"0123456789, \t\r\n"
# numpy clamps numbers beyond int64 to its maximum: anything this large goes the validating path.
_IMPLAUSIBLE_ID = 2**62
_NONCE = os.urandom(4).hex()
_RECENT = 8


def _marker(i: int) -> str:
    return f"\x00ids-{_NONCE}:{i}"


def _parse_plain(text: bytes) -> np.ndarray | None:
    if not text.strip():
        return np.empty(0, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        arr = np.fromstring(text, dtype=np.int64, sep=",")
    return arr if arr.shape[0] == text.count(b",") + 1 else None


class IdArrayCutter:
    """Cuts id arrays out of lines, remembering a few recent ones to parse only new tails."""

    def __init__(self) -> None:
        self._recent: list[tuple[bytes, np.ndarray]] = []

    def _longest_seen_prefix(self, text: bytes) -> tuple[bytes, np.ndarray] | None:
        best = None
        for seen, arr in self._recent:
            n = len(seen)
            if (best is None or n > len(best[0])) and text.startswith(seen) and text[n : n + 1] in (b"", b","):
                best = (seen, arr)
        return best

    def _ids(self, text: bytes) -> np.ndarray | None:
        prefix = self._longest_seen_prefix(text)
        # Only text not already parsed needs checking: a seen prefix was checked when first met.
        head, tail = (np.empty(0, dtype=np.int64), text) if prefix is None else (prefix[1], text[len(prefix[0]) + 1 :])
        if tail.translate(None, _PLAIN):
            return None
        rest = _parse_plain(tail)
        if rest is None or (prefix is not None and len(text) > len(prefix[0]) and rest.shape[0] == 0):
            return None
        if rest.shape[0] and int(rest.max()) >= _IMPLAUSIBLE_ID:
            return None
        ids = np.concatenate([head, rest]) if head.shape[0] else rest
        if ids.shape[0] > 64:
            self._recent.append((text, ids))
            del self._recent[:-_RECENT]
        return ids

    def cut(
        self,
        raw: bytes,
        max_ids: int | None = None,
        file: FileRef | None = None,
        offset: int | None = None,
        locate: bool = True,
    ) -> tuple[bytes, dict[str, Any]]:
        """The line with each plain prompt-id array replaced by a marker, and the arrays.

        Chat logprob entries are cut next (:func:`rollout_graph.ingest.typed.cut_logprobs`), from
        what is left of the line (the skim for them then never reads the id arrays again): their
        markers map to decoded columns rather than arrays. With ``file`` and ``offset`` (where the
        line starts in that plain file) their alternatives are left in the file until read. ``locate``:
        see :func:`rollout_graph.ingest.typed.cut_logprobs` (the caller checks with ``placed``).

        Raises:
            LimitExceeded: an array holds more than ``max_ids`` ids.
        """
        if locate:
            span = located_span(raw)
            if span is not None:
                done = self._cut_located(raw, span, max_ids, file, offset)
                if done is not None:
                    return done
        shifts: list[tuple[int, int]] = [(0, 0)]
        raw, arrays = self._cut_ids(raw, max_ids, shifts)
        where = None
        if file is not None and offset is not None:
            starts = [new for new, _ in shifts]

            def where(pos: int) -> int:
                return offset + pos + shifts[bisect_right(starts, pos) - 1][1]

        raw, columns = cut_logprobs(raw, file, where)
        arrays.update(columns)
        return raw, arrays

    def _cut_located(
        self, raw: bytes, span: tuple[int, int], max_ids: int | None, file: FileRef | None, offset: int | None
    ) -> tuple[bytes, dict[str, Any]] | None:
        """The one-choice compact layout: the content array found by bytes, the id arrays looked
        for only around it (never through it). None when the array does not decode as one."""
        start, end = span
        columns = columns_for(raw[start:end], file, None if offset is None else offset + start, located=True)
        if columns is None:
            return None
        arrays: dict[str, Any] = {}
        pieces: list[bytes] = []
        pos = 0
        content = _marker(0)
        for lo, hi in ((0, start), (end, len(raw))):
            for a, b in _array_spans(raw, lo, hi):
                if lo == 0 and b >= start:
                    continue  # runs into the content array: not an id array (left to the parser)
                ids = self._ids(raw[a:b])
                if ids is None:
                    continue
                if max_ids is not None and ids.shape[0] > max_ids:
                    raise LimitExceeded(
                        f"an id array holds {ids.shape[0]:,} ids (limit max_ids {max_ids:,}, --max-ids)"
                    )
                marker = _marker(len(arrays) + 1)
                arrays[marker] = ids
                pieces += [raw[pos : a - 1], b'"\\u0000', marker[1:].encode(), b'"']
                pos = b + 1
            if lo == 0:
                arrays[content] = columns
                pieces += [raw[pos:start], b'"\\u0000', content[1:].encode(), b'"']
                pos = end
        pieces.append(raw[pos:])
        return b"".join(pieces), arrays

    def _cut_ids(
        self, raw: bytes, max_ids: int | None, shifts: list[tuple[int, int]] | None = None
    ) -> tuple[bytes, dict[str, Any]]:
        """``shifts`` gets (position in the cut line, bytes removed before it) after each cut."""
        arrays: dict[str, Any] = {}
        pieces: list[bytes] = []
        pos = 0
        length = 0  # of the cut line so far
        for start, end in _array_spans(raw):
            if start < pos:
                continue
            ids = self._ids(raw[start:end])
            if ids is None:
                continue
            if max_ids is not None and ids.shape[0] > max_ids:
                raise LimitExceeded(f"an id array holds {ids.shape[0]:,} ids (limit max_ids {max_ids:,}, --max-ids)")
            marker = _marker(len(arrays))
            arrays[marker] = ids
            pieces += [raw[pos : start - 1], b'"\\u0000', marker[1:].encode(), b'"']
            length += start - 1 - pos + 8 + len(marker) - 1
            pos = end + 1
            if shifts is not None:
                shifts.append((length, pos - length))
        if not pieces:
            return raw, arrays
        pieces.append(raw[pos:])
        return b"".join(pieces), arrays


def _array_spans(raw: bytes, lo: int = 0, hi: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of each array body under one of the keys, in order, whose key starts in
    ``raw[lo:hi]`` (its array may run on)."""
    spans = []
    hi = len(raw) if hi is None else hi
    at = raw.find(_TAIL, lo, hi)
    while at >= 0:
        after = at + len(_TAIL)
        if any(raw[at - len(head) : at] == head for head in _HEADS):
            opening = _OPENING.match(raw, after)
            if opening:
                end = raw.find(b"]", opening.end())
                if end < 0:
                    break
                spans.append((opening.end(), end))
                after = end
        at = raw.find(_TAIL, after, hi)
    return spans


_NESTING = frozenset({dict, list})


def restore(value: Any, arrays: dict[str, Any]) -> None:
    """Put the cut arrays (or logprob columns) back where their markers are (only dict values
    can hold one)."""
    pending = [value]
    remaining = len(arrays)
    while pending and remaining:
        node = pending.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif not _NESTING.intersection(map(type, node)):
            continue  # a list of scalars (token ids, texts): a marker is only ever a dict's value
        else:
            items = enumerate(node)
        for key, child in items:
            if isinstance(child, str):
                if child[:1] == "\x00" and child in arrays and isinstance(node, dict):
                    node[key] = arrays[child]
                    remaining -= 1
            elif isinstance(child, (dict, list)):
                pending.append(child)
