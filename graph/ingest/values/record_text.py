"""A record exactly as it stands in its file, read back by file and line (:func:`read_record`).

JSONL (plain, gzip or zstd): the bytes of that line, decoded as UTF-8 (invalid bytes replaced).
A pretty-printed JSON document: the whole document when it is one object; for an array of
records, the item at that position (loading numbers them 1, 2, ...), re-serialised with two-space
indentation, because an item of a pretty-printed array has no line of its own; the result says
so. What the app's "raw record" view shows; reads through ``files/`` only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from rollout_graph.ingest.files.chunks import StreamBreak, chunks
from rollout_graph.ingest.files.json_values import parse_json
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import Limits


@dataclass(frozen=True, slots=True)
class RawRecord:
    """The record's text and whether it is byte for byte what the file holds."""

    text: str
    exact: bool
    where: str  # "line 12", "item 3 of a JSON array document", "the whole JSON document"


def _is_json(raw: bytes) -> bool:
    try:
        parse_json(raw)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _lines(stream) -> Iterator[bytes]:
    """The lines of a (possibly compressed) stream, without their newlines, under the default
    limits; a broken stream simply ends."""
    buffer = b""
    try:
        for chunk in chunks(stream, Limits()):
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            yield from complete
    except (StreamBreak, OSError, EOFError, ValueError):
        pass
    if buffer:
        yield buffer


def read_record(source: Source, line: int) -> RawRecord:
    """The record at ``line`` (1-based) of ``source``.

    Raises:
        LookupError: the file has no such line or item (it changed since it was loaded).
        OSError: the file cannot be read.
    """
    if line < 1:
        raise LookupError(f"{source.name}: no line {line}")
    with source.open() as stream:
        lines = _lines(stream)
        seen_content = False
        for number, raw in enumerate(lines, start=1):
            if not seen_content and raw.strip():
                seen_content = True
                if raw.lstrip()[:1] in (b"{", b"[") and not _is_json(raw):
                    return _document(source.name, bytes(raw) + b"\n" + b"\n".join(lines), line)
            if number == line:
                body = bytes(raw).removesuffix(b"\n").removesuffix(b"\r")  # the line, without its terminator
                return RawRecord(body.decode("utf-8", errors="replace"), True, f"line {line}")
    raise LookupError(f"{source.name}: no line {line} (the file changed since it was loaded?)")


def _document(name: str, data: bytes, line: int) -> RawRecord:
    try:
        value = parse_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LookupError(f"{name}: the JSON document no longer parses ({exc})") from exc
    if isinstance(value, list):
        if not 1 <= line <= len(value):
            raise LookupError(f"{name}: no item {line} in the JSON array")
        text = json.dumps(value[line - 1], indent=2, ensure_ascii=False)
        return RawRecord(text, False, f"item {line} of a JSON array document, re-serialised")
    return RawRecord(data.decode("utf-8", errors="replace"), True, "the whole JSON document")
