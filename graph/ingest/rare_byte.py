"""``bytes.find`` for a key holding a byte that is rare in a trace's text (``[``, ``]``, ``_``).

``bytes.find`` looks at nearly every byte of prose for a key of letters; a memchr for the key's
rare byte skips it, and each place found is checked for the key. After a few places that are not
the key's (a line where the byte is common after all) the usual search goes on from there, so a
hostile line costs what ``bytes.find`` costs. The id cutter (graph/ingest/id_arrays.py), the
content array's byte search (graph/ingest/typed.py) and the messages cutter
(graph/ingest/message_prefix.py) each call it with their key's rare byte and tries.
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
