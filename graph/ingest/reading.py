"""Bytes -> JSON values, one per line (JSONL) or one per file (a JSON document).

Handles gzip and zstd by magic bytes, tolerates NaN/Infinity literals that Python's json module
writes, and turns every unreadable line into an error value instead of an exception.
"""

from __future__ import annotations

import gzip
import io
import json
import mmap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from graph.ingest.id_arrays import IdArrayCutter, restore

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True, slots=True)
class Source:
    """A named byte stream: a file on disk or an upload held in memory."""

    name: str
    open: Callable[[], IO[bytes]]

    @classmethod
    def from_path(cls, path: str | Path) -> Source:
        p = Path(path)
        return cls(str(p), lambda: open(p, "rb"))

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> Source:
        return cls(name, lambda: io.BytesIO(data))


@dataclass(frozen=True, slots=True)
class RawValue:
    """One parsed JSON value, or the reason it could not be parsed."""

    line: int
    value: Any = None
    error: str | None = None


_RELEASE_EVERY = 64 << 20


class _BufferLines:
    """Lines of an in-memory or memory-mapped buffer (far faster than readline on long lines).

    Pages of a mapped file already read are handed back to the kernel as reading goes on, so
    a big trace does not sit in the process's resident memory twice.
    """

    def __init__(self, buf) -> None:
        self.buf = buf
        self.pos = 0
        self.released = 0

    def __iter__(self) -> Iterator[bytes]:
        buf, size = self.buf, len(self.buf)
        while self.pos < size:
            end = buf.find(b"\n", self.pos)
            end = size if end < 0 else end
            line = buf[self.pos : end]
            self.pos = end + 1
            if isinstance(buf, mmap.mmap) and self.pos - self.released > _RELEASE_EVERY:
                upto = self.pos - self.pos % mmap.PAGESIZE
                buf.madvise(mmap.MADV_DONTNEED, self.released, upto - self.released)
                self.released = upto
            yield line

    def rest(self) -> bytes:
        return self.buf[self.pos :]


class _StreamLines:
    """Lines of a decompressing stream."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.stream)

    def rest(self) -> bytes:
        return self.stream.read()


@contextmanager
def _lines(stream: IO[bytes]):
    head = stream.read(4)
    stream.seek(0)
    if head.startswith(_GZIP_MAGIC):
        yield _StreamLines(gzip.GzipFile(fileobj=stream))
    elif head.startswith(_ZSTD_MAGIC):
        import zstandard

        yield _StreamLines(io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(stream)))
    elif not head:
        yield _BufferLines(b"")
    elif isinstance(stream, io.BytesIO):
        yield _BufferLines(stream.getbuffer().tobytes())
    else:
        with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            yield _BufferLines(mapped)


def parse_json(raw: bytes) -> Any:
    """orjson first (fast); the stdlib as a fallback for NaN/Infinity literals."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def _parsed(line: int, raw: bytes, cutter: IdArrayCutter) -> RawValue:
    try:
        cut, arrays = cutter.cut(raw)
        value = parse_json(cut)
    except (ValueError, UnicodeDecodeError) as exc:
        return RawValue(line, error=f"not JSON: {_short(exc)}")
    if arrays:
        restore(value, arrays)
    return RawValue(line, value)


def _short(exc: Exception, limit: int = 160) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_values(source: Source) -> Iterator[RawValue]:
    """Yield the JSON values in a source, in order, with 1-based line numbers.

    A file whose first non-blank line is not JSON on its own but opens an object or array is
    read as one pretty-printed document. If the stream breaks (truncated gzip, corrupt zstd),
    the values read so far are kept and one error names the line where reading stopped.
    """
    cutter = IdArrayCutter()
    with source.open() as raw_stream, _lines(raw_stream) as lines:
        line_no = 0
        first = True
        try:
            for raw in lines:
                line_no += 1
                if not raw.strip():
                    continue
                if first:
                    first = False
                    value = _parsed(line_no, raw, cutter)
                    if value.error and raw.lstrip()[:1] in (b"{", b"["):
                        yield from _whole_document(line_no, raw + b"\n" + lines.rest(), cutter)
                        return
                    yield value
                    continue
                yield _parsed(line_no, raw, cutter)
        except (OSError, EOFError, ValueError) as exc:
            yield RawValue(line_no + 1, error=f"stream stopped after line {line_no}: {_short(exc)}")


def _whole_document(line: int, data: bytes, cutter: IdArrayCutter) -> Iterator[RawValue]:
    value = _parsed(line, data, cutter)
    if value.error:
        yield value
    elif isinstance(value.value, list):
        # A JSON array of records: "line" is the item's 1-based position.
        for i, item in enumerate(value.value, start=1):
            yield RawValue(i, item)
    else:
        yield value
