"""Bytes -> JSON values, one per line (JSONL) or one per file (a JSON document).

Handles gzip and zstd by magic bytes, tolerates NaN/Infinity literals that Python's json module
writes, and turns every unreadable line into an error value instead of an exception.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

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


def _decompressed(stream: IO[bytes]) -> IO[bytes]:
    head = stream.read(4)
    stream.seek(0)
    if head.startswith(_GZIP_MAGIC):
        return gzip.GzipFile(fileobj=stream)
    if head.startswith(_ZSTD_MAGIC):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(stream))
    return stream


def parse_json(raw: bytes) -> Any:
    """orjson first (fast); the stdlib as a fallback for NaN/Infinity literals."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def _parsed(line: int, raw: bytes) -> RawValue:
    try:
        return RawValue(line, parse_json(raw))
    except (ValueError, UnicodeDecodeError) as exc:
        return RawValue(line, error=f"not JSON: {_short(exc)}")


def _short(exc: Exception, limit: int = 160) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_values(source: Source) -> Iterator[RawValue]:
    """Yield the JSON values in a source, in order, with 1-based line numbers.

    A file whose first non-blank line is not JSON on its own but opens an object or array is
    read as one pretty-printed document. If the stream breaks (truncated gzip, corrupt zstd),
    the values read so far are kept and one error names the line where reading stopped.
    """
    with source.open() as raw_stream:
        stream = _decompressed(raw_stream)
        line_no = 0
        first = True
        try:
            for raw in stream:
                line_no += 1
                if not raw.strip():
                    continue
                if first:
                    first = False
                    value = _parsed(line_no, raw)
                    if value.error and raw.lstrip()[:1] in (b"{", b"["):
                        yield from _whole_document(line_no, raw + stream.read())
                        return
                    yield value
                    continue
                yield _parsed(line_no, raw)
        except (OSError, EOFError, ValueError) as exc:
            yield RawValue(line_no + 1, error=f"stream stopped after line {line_no}: {_short(exc)}")


def _whole_document(line: int, data: bytes) -> Iterator[RawValue]:
    value = _parsed(line, data)
    if value.error:
        yield value
    elif isinstance(value.value, list):
        # A JSON array of records: "line" is the item's 1-based position.
        for i, item in enumerate(value.value, start=1):
            yield RawValue(i, item)
    else:
        yield value
