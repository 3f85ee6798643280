"""Chunks -> the non-blank lines of a stream, numbered, each copied out once.

Entry points: :func:`split_lines` (what :func:`rollout_graph.ingest.files.chunks.chunks` yields ->
:class:`Line` values) and :class:`Line`. A line longer than ``max_line_bytes`` is never held
whole: its bytes are None and the reader reports it. Blank runs cost a memchr, not a Python loop.
Above ``chunks``; below ``values/read.py`` (which parses each line) and the loaders' range
readers. docs/performance.md, "Cold inspect: reading lines".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from rollout_graph.ingest.files.chunks import StreamState

_NON_BLANK = re.compile(rb"[^ \t\r\n]")


@dataclass(slots=True)
class Line:
    """One non-blank line of a stream."""

    number: int
    raw: bytes | None  # None when the line is over max_line_bytes
    final: bool = False  # the file's last line, with no newline after it
    offset: int = -1  # of the line's first byte in the (decompressed) stream


def split_lines(
    chunks: Iterator[bytes] | Iterator[bytes | bytearray], max_line: int, seen: StreamState
) -> Iterator[Line]:
    """Non-blank lines with 1-based numbers; ``seen.newlines`` follows the newlines consumed.

    A chunk may be a reused buffer: every byte kept past it is copied out, each line once, into
    its own ``bytes``."""
    line_no = 0  # newlines consumed so far
    carry: list[bytes | memoryview] = []
    carry_len = 0
    carry_at = 0  # stream offset of the carried line's first byte
    too_long = False
    base = 0  # stream offset of the chunk's first byte
    for chunk in chunks:
        at, base = base, base + len(chunk)
        view = memoryview(chunk)
        pos = 0
        if carry or too_long:
            end = chunk.find(b"\n")
            if end < 0:
                if not too_long:
                    carry.append(bytes(chunk))
                    carry_len += len(chunk)
                    if carry_len > max_line:
                        carry, carry_len, too_long = [], 0, True
                continue
            seen.newlines = line_no
            if too_long or carry_len + end > max_line:
                yield Line(line_no + 1, None)
            else:
                carry.append(view[:end])
                yield Line(line_no + 1, b"".join(carry), offset=carry_at)
            carry, carry_len, too_long = [], 0, False
            line_no += 1
            pos = end + 1
        elif chunk.isspace():
            line_no += chunk.count(b"\n")
            seen.newlines = line_no
            continue
        while True:
            m = _NON_BLANK.search(chunk, pos)
            if m is None:
                line_no += chunk.count(b"\n", pos)
                seen.newlines = line_no
                break
            start = m.start()
            if start > pos:
                line_no += chunk.count(b"\n", pos, start)
            end = chunk.find(b"\n", start)
            seen.newlines = line_no
            if end < 0:
                carry_len = len(chunk) - start
                carry_at = at + start
                if carry_len > max_line:
                    carry, carry_len, too_long = [], 0, True
                else:
                    carry = [bytes(view[start:])]
                break
            yield Line(line_no + 1, bytes(view[start:end]) if end - start <= max_line else None, offset=at + start)
            line_no += 1
            pos = end + 1
    seen.newlines = line_no
    if too_long:
        yield Line(line_no + 1, None, final=True)
    elif carry:
        yield Line(line_no + 1, b"".join(carry), final=True, offset=carry_at)
