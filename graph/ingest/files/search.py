"""Byte searches the shortcuts share: a key found by a memchr for its rare byte, and a search that
passes over a span known not to hold the key.

Entry points: :func:`find_by_rare_byte` (``bytes.find`` for a key holding a byte rare in a trace's
text: ``[``, ``]``, ``_``; after a few places that are not the key's, the usual search, so a
hostile line costs what ``bytes.find`` costs), :func:`find_outside` (the one "find outside a span"
of the id cutter and the content-array search) and :func:`find_between` (a search of the parts of
a line between spans already cut: what the line with those cuts made would find). Bottom of ingest.
docs/performance.md, "Cold inspect: reading lines" ("Key searches start at a rare byte").
"""

from __future__ import annotations

import re
from collections.abc import Callable


def find_by_rare_byte(
    raw: bytes,
    key: bytes,
    start: int,
    end: int,
    rare: int,
    tries: int,
    search: Callable[[bytes, int, int], re.Match[bytes] | None] | None = None,
) -> int:
    """``raw.find(key, start, end)``, found by a memchr for ``key[rare]``, each place checked for
    the key; after ``tries`` places that are not the key's, ``search`` (a compiled pattern's
    ``search`` of the key; default ``bytes.find``) from the next such place."""
    k = len(key)
    byte = key[rare : rare + 1]
    last = max(0, end - (k - 1 - rare))  # an occurrence's rare byte lies before this (never a negative index)
    at = raw.find(byte, start + rare, last)
    for _ in range(tries):
        if at < 0:
            return -1
        if raw.startswith(key, at - rare):
            return at - rare
        at = raw.find(byte, at + 1, last)
    if at < 0:
        return -1
    if search is None:
        return raw.find(key, at - rare, end)
    found = search(raw, at - rare, end)
    return -1 if found is None else found.start()


Find = Callable[[bytes, bytes, int, int], int]  # (raw, key, start, end) -> raw.find(key, start, end)


def _plain_find(raw: bytes, key: bytes, start: int, end: int) -> int:
    return raw.find(key, start, end)


def find_outside(
    raw: bytes, key: bytes, pos: int, hi: int, skip: tuple[int, int] | None, find: Find | None = None
) -> int:
    """``raw.find(key, pos, hi)`` where ``raw[skip[0]:skip[1]]`` is known to hold no ``key``: that
    span is not searched (an occurrence straddling either of its ends still is). ``find``: the
    search itself (default ``bytes.find``)."""
    find = find or _plain_find
    if skip is not None:
        a, b = skip
        if pos < a:
            at = find(raw, key, pos, min(hi, a + len(key) - 1))
            if at >= 0:
                return at
        pos = max(pos, b - len(key) + 1)
    return find(raw, key, pos, hi)


def find_between(raw: bytes, key: bytes, spans: list, start: int = 0, end: int | None = None) -> int:
    """``raw.find(key, start, end)`` in the parts of ``raw`` between ``spans`` (sorted, apart, each
    ``(start, end, ...)``): an occurrence inside a span, or crossing its edge, is not found; the
    spans' bytes are never searched."""
    end = len(raw) if end is None else end
    pos = start
    for span in spans:
        if span[0] >= end:
            break
        if span[0] > pos:
            at = raw.find(key, pos, span[0])
            if at >= 0:
                return at
        pos = max(pos, span[1])
    return raw.find(key, pos, end) if pos < end else -1
