"""One record read from its place in a file, without reading the rest: what a deep link to a trace
not yet loaded shows first (docs/user-guide.md "Deep links").

A call's id is a field of its record (``call_id``, ``id`` or ``node_id``; else its line number) and
its rollout is another field (``session_id``...), so which line holds a given call cannot be known
without reading every line before it. A link therefore carries the file and the line of the call
(the app writes them); :func:`read_calls_at` reads that one line and converts it with the loader's
own per-line path (:func:`rollout_graph.ingest.reading.parse_line` then
:func:`rollout_graph.ingest.formats.parse_value`), so the calls are the ones a whole load gives for
that line, field for field (``tests/test_one_call.py`` checks it on every bundled sample and on odd
inputs). Two things only a whole load knows are not applied: a node id taken earlier in the same
rollout is renamed by the load (``id~file:line``), and messages are shared across calls (the same
text, one copy). :func:`find_call` accepts the renamed id.

On a plain file the line is found by counting newlines in a memory map (memchr speed: a 500 MB
file in about 0.1 s) and only that line is parsed. A compressed file, a pretty-printed JSON
document or an array (whose "lines" are items) is read with the loader's own reader up to that
line instead: the same values, only slower.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from rollout_graph.core.records import Call
from rollout_graph.ingest.formats import RecordError, parse_value
from rollout_graph.ingest.id_arrays import IdArrayCutter
from rollout_graph.ingest.limits import LimitExceeded, Limits, using
from rollout_graph.ingest.loading import rollout_name
from rollout_graph.ingest.reading import (
    _GZIP_MAGIC,
    _NON_BLANK,
    _ZSTD_MAGIC,
    _ZSTD_SKIPPABLE,
    RawValue,
    Source,
    parse_line,
    read_values,
)
from rollout_graph.ingest.typed import FileRef


def _locate(data: mmap.mmap, line: int) -> tuple[int, int] | None:
    """(start, end) of line ``line``'s record bytes in a plain file: from its first non-blank byte
    to its newline (or the end), as the loader's splitter cuts them; None when the file has fewer
    lines or that line is blank."""
    pos = 0
    for _ in range(line - 1):
        found = data.find(b"\n", pos)
        if found < 0:
            return None
        pos = found + 1
    end = data.find(b"\n", pos)
    end = len(data) if end < 0 else end
    m = _NON_BLANK.search(data, pos, end)
    return None if m is None else (m.start(), end)


def _compressed_or_binary(path: str) -> bool:
    from rollout_graph.ingest.formats import binary_files

    if binary_files.is_binary(path):
        return True
    with open(path, "rb") as f:
        head = f.read(4)
    return (
        head.startswith(_GZIP_MAGIC)
        or head.startswith(_ZSTD_MAGIC)
        or (len(head) == 4 and head[0] & 0xF0 == 0x50 and head[1:] == _ZSTD_SKIPPABLE)
    )


def _values_at(source: Source, line: int, limits: Limits) -> RawValue | None:
    """The loader's own reader, up to ``line`` (compressed files, documents, arrays)."""
    values = read_values(source, limits)
    try:
        for raw in values:
            if raw.line == line:
                return raw
            if raw.line > line:
                return None
    finally:
        values.close()
    return None


def _fast_value(path: str, line: int, limits: Limits) -> RawValue | None | bool:
    """The value at ``line`` of a plain file, parsed as the loader parses it; False when the file
    must be read the loader's way after all: its first non-blank line is not a JSON object on its
    own (a pretty-printed document or a one-line array numbers its records differently)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            lead = _NON_BLANK.search(data)
            if lead is None:
                return None
            lead_end = data.find(b"\n", lead.start())
            lead_end = size if lead_end < 0 else lead_end
            if lead_end - lead.start() > limits.max_line_bytes:
                return False
            probe = parse_line(1, bytes(data[lead.start() : lead_end]), IdArrayCutter(), limits)
            if not isinstance(probe.value, dict):
                return False
            where = _locate(data, line)
            if where is None:
                return None
            start, end = where
            if end > limits.max_file_bytes:
                return None  # the loader stops reading before this line
            if end - start > limits.max_line_bytes:
                return RawValue(line, error="over a limit: line longer than max_line_bytes")
            raw = bytes(data[start:end])
        value = parse_line(line, raw, IdArrayCutter(), limits, FileRef.of(f.fileno(), path), start)
    if value.error and end == size:
        return RawValue(line, error=f"incomplete last line (no newline yet): {value.error}", pending=True)
    return value


def read_calls_at(source: Source, line: int, limits: Limits | None = None) -> list[Call]:
    """The calls the loader makes of the record at ``line`` (1-based) of ``source``: usually one;
    several for a rollout document or a record with several choices; none when that line holds no
    record, is skipped by the loader (the reason is then in the whole load's report) or the file
    cannot be read. Never raises on bad input.
    """
    limits = limits or Limits()
    if line < 1:
        return []
    try:
        with using(limits):
            raw: RawValue | None | bool = False
            if source.path is not None and not _compressed_or_binary(source.path):
                raw = _fast_value(source.path, line, limits)
            if raw is False:
                raw = _values_at(source, line, limits)
            if not isinstance(raw, RawValue) or raw.error is not None or raw.pending:
                return []
            return parse_value(raw, source.name, rollout_name(source.name)).calls
    except (OSError, ValueError, RecordError, LimitExceeded, RecursionError, MemoryError):
        return []
    except Exception:  # noqa: BLE001 - an untrusted record must never raise here either
        return []


def find_call(calls: list[Call], session_id: str, node_id: str) -> Call | None:
    """The call of ``calls`` a link names: same rollout, and the same node id or the name a whole
    load gives it when that id was taken earlier in its rollout (``id~file:line``)."""
    for call in calls:
        if call.session_id != session_id:
            continue
        if call.node_id == node_id:
            return call
        renamed = f"{call.node_id}~{Path(call.source).name}:{call.line}"
        if node_id == renamed or node_id.startswith(renamed + "#"):
            return call
    return None
