"""The calls of one record read from its place in a file, without reading the rest: what a deep
link to a trace not yet loaded shows first (docs/user-guide.md "Deep links").

Entry points: :func:`read_calls_at` (the calls the loader makes of the record at a line) and
:func:`find_call` (the call a link names, by its id or the id a whole load renames it to). A
link carries the file and the line of its call; on a plain file that line is found by counting
newlines in 8 MB blocks (never a memory map) and parsed alone, with the loader's own splitter,
``parse_line`` and ``parse_value``, so the calls are field for field those of a whole load
(tests/ingest/test_one_call.py). A compressed file, a document or an array is read with
``read_values`` up to that line. Two things only a whole load knows are not applied: a node id
taken earlier in the rollout is renamed (``id~file:line``), and message texts are not shared.
Load layer.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from rollout_graph.core.records import Call
from rollout_graph.ingest.files.chunks import StreamState, compressed, plain_chunks
from rollout_graph.ingest.files.json_values import RawValue
from rollout_graph.ingest.files.lines import Line, split_lines
from rollout_graph.ingest.files.sources import FileRef, Source
from rollout_graph.ingest.formats.registry import RecordError, parse_value
from rollout_graph.ingest.limits import LimitExceeded, Limits, using
from rollout_graph.ingest.load.trace_files import rollout_name
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter
from rollout_graph.ingest.values.binary import is_binary
from rollout_graph.ingest.values.line import parse_line
from rollout_graph.ingest.values.read import read_values

_BLOCK = 8 << 20  # bytes counted at a time (never a memory map: a file truncated under one kills the process)


def _line_start(f: BinaryIO, line: int) -> int | None:
    """Where line ``line`` (1-based) of the open plain file starts, counting newlines block by
    block (memchr speed); None when the file has fewer lines."""
    f.seek(0)
    offset, seen, need = 0, 0, line - 1
    while seen < need:
        block = f.read(_BLOCK)
        if not block:
            return None
        n = block.count(b"\n")
        if seen + n >= need:
            at = -1
            for _ in range(need - seen):
                at = block.find(b"\n", at + 1)
            return offset + at + 1
        seen += n
        offset += len(block)
    return 0


def _record_from(f: BinaryIO, pos: int, limit: int) -> Line | None:
    """The first non-blank line at or after ``pos``, cut by the loader's own splitter (its raw
    bytes None when over ``limit``, never held whole); ``number`` counts from ``pos`` (1: the line
    starting there) and ``offset`` from the start of the file."""
    f.seek(pos)
    found = next(split_lines(plain_chunks(f, b""), limit, StreamState()), None)
    if found is not None and found.offset >= 0:
        found.offset += pos
    return found


def _compressed_or_binary(path: str) -> bool:
    if is_binary(path):
        return True
    with open(path, "rb") as f:
        head = f.read(4)
    return compressed(head)


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
        lead = _record_from(f, 0, limits.max_line_bytes)
        if lead is None:
            return None
        if lead.raw is None:
            return False
        probe = parse_line(1, lead.raw, IdArrayCutter(), limits)
        if not isinstance(probe.value, dict):
            return False
        pos = _line_start(f, line)
        if pos is None:
            return None
        record = _record_from(f, pos, limits.max_line_bytes)
        if record is None or record.number != 1:
            return None  # a blank line
        if record.raw is None:
            return RawValue(line, error="over a limit: line longer than max_line_bytes")
        if record.offset + len(record.raw) > limits.max_file_bytes:
            return None  # the loader stops reading before this line
        value = parse_line(line, record.raw, IdArrayCutter(), limits, FileRef.of(f.fileno(), path), record.offset)
    if value.error and record.final:
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
