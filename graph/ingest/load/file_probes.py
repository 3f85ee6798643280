"""Small positional reads of a plain file on disk: where its lines start, what one holds, how
many newlines a part has; and a part of it read as a stream.

Entry points: :class:`RangeReader` / :class:`HeadReader` (bytes ``[start, end)`` of a file as a
stream, the head one with the file's descriptor), :func:`line_at`, :func:`next_line`,
:func:`next_nonblank`, :func:`newlines`, :func:`lines_before`, :func:`standalone`. What the pool's
range split and the two-part read cut files with: a few small reads at each cut, never a memory
map (a file truncated under a map kills the process: docs/limits.md). Load layer.
"""

from __future__ import annotations

import io
import os
from typing import Any

from rollout_graph.ingest.files.json_values import parse_json

PLAIN_SUFFIXES = (".jsonl", ".json", ".ndjson")


class RangeReader(io.RawIOBase):
    """``[start, end)`` of a file as a stream: a worker reads its range in chunks, never whole."""

    def __init__(self, path: str, start: int, end: int) -> None:
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed with the stream
        self._file.seek(start)
        self._left = end - start if end >= 0 else -1

    def readable(self) -> bool:
        """Always: the range is read."""
        return True

    def readinto(self, buffer: Any) -> int:
        """Into ``buffer``, at most what is left of the range."""
        view = memoryview(buffer).cast("B")
        want = len(view) if self._left < 0 else min(len(view), self._left)
        if want == 0:
            return 0
        n = self._file.readinto(view[:want]) or 0
        if self._left >= 0:
            self._left -= n
        return n

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of what is left of the range (all of it without)."""
        if size is None or size < 0:
            size = self._left if self._left >= 0 else 1 << 62
        want = size if self._left < 0 else min(size, self._left)
        data = self._file.read(want) if want > 0 else b""
        if self._left >= 0:
            self._left -= len(data)
        return data

    def close(self) -> None:
        """Close the file."""
        self._file.close()
        super().close()


class HeadReader(RangeReader):
    """The parent's part of the file, with the file's descriptor (alternatives are read back)."""

    def fileno(self) -> int:
        """The file's descriptor (a span of it is read back later: a FileRef)."""
        return self._file.fileno()


PROBE_BYTES = 1 << 16


def pread(fd: int, n: int, at: int) -> bytes:
    """Up to ``n`` bytes of the open file ``fd`` from offset ``at`` (a descriptor of this call's own)."""
    if hasattr(os, "pread"):
        return os.pread(fd, n, at)
    os.lseek(fd, at, os.SEEK_SET)  # Windows: no positional read
    return os.read(fd, n)


def next_line(fd: int, pos: int, size: int) -> int:
    """The start of the first line beginning after ``pos - 1`` (``pos`` itself when a line starts there)."""
    if pos <= 0:
        return 0
    at = pos - 1
    while at < size:
        block = pread(fd, PROBE_BYTES, at)
        if not block:
            break
        i = block.find(b"\n")
        if i >= 0:
            return at + i + 1
        at += len(block)
    return size


def next_nonblank(fd: int, pos: int, size: int) -> int:
    """The start of the first line at or after the line start ``pos`` holding more than blanks."""
    line_start = pos
    while pos < size:
        block = pread(fd, PROBE_BYTES, pos)
        if not block:
            break
        stripped = block.lstrip(b" \t\r\n")
        skipped = block[: len(block) - len(stripped)]
        newline = skipped.rfind(b"\n")
        if newline >= 0:
            line_start = pos + newline + 1
        if stripped:
            return line_start
        pos += len(block)
    return size


def line_at(fd: int, start: int, size: int, max_line: int) -> tuple[int, bytes | None] | None:
    """``(start of the next line, the line's bytes)`` of the line at ``start``; the bytes are None
    when the line is longer than ``max_line`` (never held whole). None at the end of the file."""
    if start >= size:
        return None
    pieces: list[bytes] = []
    held = 0
    at = start
    while at < size:
        block = pread(fd, PROBE_BYTES, at)
        if not block:
            break
        i = block.find(b"\n")
        part = block if i < 0 else block[:i]
        held += len(part)
        if held <= max_line:
            pieces.append(part)
        if i >= 0:
            return at + i + 1, b"".join(pieces) if held <= max_line else None
        at += len(block)
    return size, b"".join(pieces) if held <= max_line else None


def holds_more_than_blanks(fd: int, start: int, end: int, text: bytes | None) -> bool:
    """Whether the line at ``start`` (the next one at ``end``; ``text`` its bytes, None when it
    was too long to hold) holds more than blanks; a long one is probed a block at a time."""
    if text is not None:
        return bool(text.strip())
    at = start
    while at < end:
        block = pread(fd, min(PROBE_BYTES, end - at), at)
        if not block:
            return False
        if block.strip():
            return True
        at += len(block)
    return False


def standalone(line: bytes) -> bool:
    """Whether a line is a JSON value on its own (a range may start there)."""
    try:
        parse_json(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return True


COUNT_WINDOW = 1 << 20  # bytes of the file read at a time while counting its lines (measured: 1 MB as fast as 16)


def lines_before(path: str, offset: int) -> int:
    """1 + the newlines in the file's first ``offset`` bytes: the line number at ``offset`` (a
    file shorter than ``offset`` by now counts what it still holds)."""
    with open(path, "rb", buffering=0) as f:
        return newlines(f.fileno(), 0, offset) + 1


def newlines(fd: int, start: int, end: int) -> int:
    """The newlines in bytes ``[start, end)`` of the open file ``fd``, counted one block
    (:data:`COUNT_WINDOW`) at a time into one reused buffer (never a memory map: a file truncated under one kills the
    process, docs/limits.md); a file that ends sooner by now counts what it holds."""
    count = 0
    buffer = bytearray(min(COUNT_WINDOW, max(end - start, 1)))
    view = memoryview(buffer)
    at = start
    positional = hasattr(os, "preadv")
    while at < end:
        want = min(len(buffer), end - at)
        if positional:
            n = os.preadv(fd, [view[:want]], at)
            count += buffer.count(b"\n", 0, n)
        else:  # Windows: no positional read into a buffer
            block = pread(fd, want, at)
            n = len(block)
            count += block.count(b"\n")
        if not n:
            break
        at += n
    return count
