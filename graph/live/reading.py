"""Reading only what was appended to a trace file since the last look.

A :class:`FileFollower` keeps a file's offset, line count and unfinished last line. Each
:meth:`FileFollower.read` parses the complete lines appended since (with the same per-line
parser as a batch load, so a line gives exactly the value ``inspect`` reads), and keeps a last
line without its newline *pending*: it is never reported as a bad record. A pending line that is
already a complete JSON object or array is taken at once (a file whose writer omits the final
newline still loads completely); the newline that may follow it later is skipped.

Compressed files and whole-file JSON documents cannot be followed by offset: they are read whole
(by the batch reader) and read again, from the start, whenever they change. A file that shrinks
(truncated) or is replaced by another file at the same path (rotated) is read again from the
start too; :class:`FileRead` says so, and why, so the caller can drop what it had from it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rollout_graph.ingest.files.json_values import RawValue
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter
from rollout_graph.ingest.values.line import parse_line as _parsed
from rollout_graph.ingest.values.read import read_values

CHUNK = 32 << 20  # bytes read at a time from a large file
_MAGIC = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")  # gzip, zstd
TRUNCATED = "truncated"
REPLACED = "replaced"
CHANGED = "changed"


@dataclass(slots=True)
class FileRead:
    """What one look at a file found: new values, whether it must be read again from the start
    (``reset``: ``truncated``, ``replaced`` or ``changed``; ``values`` then start from line 1),
    whether it has gone, and how many bytes of an unfinished last line are waiting."""

    values: list[RawValue] = field(default_factory=list)
    reset: str | None = None
    missing: bool = False
    pending: int = 0


class FileFollower:
    """One trace file followed by offset (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = str(self.path)
        self.identity: tuple[int, int] | None = None
        self._restart()

    def _restart(self) -> None:
        self.offset = 0
        self.line = 0
        self.pending = b""
        self.whole: tuple[int, int] | None = None  # (size, mtime) of a file read whole
        self._cutter = IdArrayCutter()
        self._seen_content = False
        self._glued = False  # a pending line was taken; its newline may still come

    def adopt(self, size: int, identity: tuple[int, int]) -> None:
        """The first ``size`` bytes (whole lines) were loaded by the batch reader: follow from there.
        Their lines are counted when something is appended (to number the new records' lines)."""
        self._restart()
        self.offset = size
        self.identity = identity
        self._seen_content = True
        self.line = -1

    def read(self) -> FileRead:
        """Parse what was appended since the last call (everything, the first time)."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return FileRead(missing=True, pending=len(self.pending))
        identity = (stat.st_dev, stat.st_ino)
        out = FileRead()
        if self.identity is not None and identity != self.identity:
            out.reset = REPLACED
        elif stat.st_size < self.offset:
            out.reset = TRUNCATED
        elif self.whole is not None and (stat.st_size, stat.st_mtime_ns) != self.whole:
            out.reset = CHANGED
        if out.reset is not None:
            self._restart()
        self.identity = identity
        if self.whole is not None:
            return out
        if stat.st_size > self.offset:
            if self.line < 0:
                self.line = count_lines(self.path, self.offset)
            with open(self.path, "rb") as stream:
                stream.seek(self.offset)
                if self.offset == 0:
                    head = stream.read(4)
                    if head.startswith(_MAGIC):
                        return self._read_whole(out)
                    stream.seek(0)
                remaining = stat.st_size - self.offset
                while remaining > 0:
                    data = stream.read(min(CHUNK, remaining))
                    if not data:
                        break
                    remaining -= len(data)
                    self.offset += len(data)
                    if self._lines(data, out):
                        return self._read_whole(out)
        self._take_complete_pending(out)
        out.pending = len(self.pending)
        return out

    def _read_whole(self, out: FileRead) -> FileRead:
        """A compressed file or a JSON document: the batch reader, on the whole file."""
        self._restart()
        stat = os.stat(self.path)
        out.values = list(read_values(Source.from_path(self.path)))
        self.whole = (stat.st_size, stat.st_mtime_ns)
        self.offset = stat.st_size
        return out

    def _lines(self, data: bytes, out: FileRead) -> bool:
        """Parse the complete lines in ``pending + data``; True when the file is a JSON document."""
        pieces = (self.pending + data).split(b"\n")
        self.pending = pieces.pop()
        for raw in pieces:
            if self._glued:  # the newline after a line already taken
                self._glued = False
                if not raw.strip():
                    continue
                self.line -= 1  # text after a complete record on the same line: the same line
            self.line += 1
            if not raw.strip():
                continue
            value = _parsed(self.line, raw, self._cutter)
            if not self._seen_content:
                self._seen_content = True
                if value.error and raw.lstrip()[:1] in (b"{", b"["):
                    return True  # a pretty-printed document, as the batch reader decides
            out.values.append(value)
        return False

    def _take_complete_pending(self, out: FileRead) -> None:
        text = self.pending.strip()
        if not text or text[:1] not in (b"{", b"[") or text[-1:] not in (b"}", b"]"):
            return
        value = _parsed(self.line + 1, self.pending, self._cutter)
        if value.error:
            return  # still being written
        self.line += 1
        self._seen_content = True
        self.pending = b""
        self._glued = True
        out.values.append(value)


def count_lines(path: str | Path, upto: int) -> int:
    """Newlines in the first ``upto`` bytes of the file."""
    lines = 0
    with open(path, "rb") as stream:
        while upto > 0:
            data = stream.read(min(CHUNK, upto))
            if not data:
                break
            upto -= len(data)
            lines += data.count(b"\n")
    return lines


def whole_lines(path: str | Path) -> tuple[int, tuple[int, int], int] | None:
    """``(size, identity, mtime)`` when reading the file as it is now with the batch reader equals
    following it line by line: a plain (not compressed) JSON-lines file whose last line is complete
    and whose first line is a JSON value on its own (not the start of a pretty-printed document).
    None otherwise (the follower reads it)."""
    try:
        stat = os.stat(path)
        if stat.st_size == 0:
            return None
        with open(path, "rb") as stream:
            if stream.read(4).startswith(_MAGIC):
                return None
            stream.seek(stat.st_size - 1)
            if stream.read(1) != b"\n":
                return None
            stream.seek(0)
            first = b""
            while not first.strip():
                first = stream.readline(64 << 20)
                if not first:
                    return None
            if not first.endswith(b"\n") or _parsed(1, first.rstrip(b"\n"), IdArrayCutter()).error:
                return None
    except OSError:
        return None
    return stat.st_size, (stat.st_dev, stat.st_ino), stat.st_mtime_ns
