"""Byte searches the shortcuts share: a key found by a memchr for its rare byte, and a search that
passes over a span known not to hold the key.

Entry points: :func:`find_by_rare_byte` (``bytes.find`` for a key holding a byte rare in a trace's
text: ``[``, ``]``, ``_``; after a few places that are not the key's, the usual search, so a
hostile line costs what ``bytes.find`` costs) and :func:`find_outside` (the one "find outside the
spans": a line's parts known to hold no key, or already cut, are never searched; the id cutter, the
content-array check and the messages cutter use it). Bottom of ingest.
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


def find_outside(raw: bytes, key: bytes, pos: int, hi: int, spans: list | tuple, find: Find | None = None) -> int:
    """``raw.find(key, pos, hi)`` where ``spans`` (sorted, apart, each ``(start, end, ...)``) are
    parts of ``raw`` known to hold no ``key`` (a repeated messages body), or parts already cut from
    the line (an id array): their bytes are not searched; an occurrence crossing the edge of one
    still is found. ``find``: the search itself (default ``bytes.find``)."""
    find = find or _plain_find
    if not spans:
        return find(raw, key, pos, hi)
    k = len(key)
    for span in spans:
        a, b = span[0], span[1]
        if b <= pos:
            continue
        if a >= hi:
            break
        if pos < a:
            at = find(raw, key, pos, min(hi, a + k - 1))
            if at >= 0:
                return at
        pos = max(pos, b - k + 1)
    return find(raw, key, pos, hi) if pos < hi else -1
