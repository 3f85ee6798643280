"""A source -> its JSON values, in order, with 1-based line numbers (:func:`read_values`).

JSONL is read line by line (``files/``: chunks, then lines; each line through
:func:`~rollout_graph.ingest.values.line.parse_line` with one id cutter and one messages cutter per
file). A file that is one pretty-printed JSON document, or one JSON array, yields its value or
its items; a binary file (``values/binary.py``: Parquet rows, pickles refused) its rows. Every
unreadable line becomes an error value, never an exception; a stream that breaks (corrupt or
truncated compression, an I/O error, a limit) keeps every value read before the break and ends
with one error naming it. Called by the loaders (``load/``) and the signals reader.
docs/formats.md describes the rules; docs/limits.md the limits.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from rollout_graph.ingest.files.chunks import StreamBreak, StreamState, chunks
from rollout_graph.ingest.files.json_values import RawValue
from rollout_graph.ingest.files.lines import Line, split_lines
from rollout_graph.ingest.files.sources import FileRef, Source
from rollout_graph.ingest.limits import Limits, human
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter
from rollout_graph.ingest.shortcuts.messages import MessageCutter
from rollout_graph.ingest.values import binary
from rollout_graph.ingest.values.line import parse_line


def too_long(line: int, limits: Limits) -> RawValue:
    """The error value of a line over ``max_line_bytes``."""
    return RawValue(
        line,
        error=f"over a limit: line longer than {human(limits.max_line_bytes)} (limit max_line_bytes, --max-line-bytes)",
    )


def _items(value: Any) -> Iterator[RawValue]:
    """A file that is one JSON array holds records: "line" is the item's 1-based position."""
    for i, item in enumerate(value, start=1):
        yield RawValue(i, item)


def read_values(source: Source, limits: Limits | None = None) -> Generator[RawValue, None, None]:
    """Yield the JSON values in a source, in order, with 1-based line numbers.

    JSONL is read line by line. A file whose first non-blank line does not parse, opens an object
    or array, and whose next line is not a JSON object or array on its own, is tried as one
    pretty-printed document; if that fails too, it is read line by line after all, so a broken
    first line loses only itself. A file that is one JSON array (pretty-printed or on one line)
    yields its items.

    Raises:
        OSError: the source cannot be opened (missing, unreadable, not a regular file).
    """
    limits = limits or Limits()
    if binary.is_binary(source.name):
        yield from binary.values(source, limits)
        return
    cutter = IdArrayCutter()
    messages = MessageCutter()
    with source.open() as stream:
        seen = StreamState()
        lines = split_lines(chunks(stream, limits, seen, reuse=True), limits.max_line_bytes, seen)
        try:
            first = next(lines, None)
            if first is None:
                return
            file = FileRef.of_stream(stream, source.path) if seen.plain else None
            if first.raw is None:
                yield too_long(first.number, limits)
            else:
                value = parse_line(first.number, first.raw, cutter, limits, file, first.offset, messages)
                if value.error and first.raw[:1] in (b"{", b"["):
                    second = next(lines, None)
                    if second is not None and not _standalone(second, limits):
                        yield from _document_or_lines(first, second, lines, cutter, limits)
                        return
                    yield final(value, first)
                    if second is not None:
                        yield from _line_values(second, cutter, limits, file, messages)
                elif isinstance(value.value, list):  # json.dump(list) writes one line
                    second = next(lines, None)
                    if second is None:
                        yield from _items(value.value)
                        return
                    yield value
                    yield from _line_values(second, cutter, limits, file, messages)
                else:
                    yield final(value, first)
            for line in lines:  # _line_values inline: no generator a line
                if line.raw is None:
                    yield too_long(line.number, limits)
                else:
                    yield final(parse_line(line.number, line.raw, cutter, limits, file, line.offset, messages), line)
        except StreamBreak as exc:
            yield RawValue(seen.newlines + 1, error=f"stream stopped after line {seen.newlines}: {exc}")
        except OSError as exc:
            reason = exc.strerror or str(exc)
            yield RawValue(seen.newlines + 1, error=f"stream stopped after line {seen.newlines}: {reason}")


def final(value: RawValue, line: Line) -> RawValue:
    """``value``, marked pending when it is an error on a last line with no newline yet (a file
    still being written)."""
    if value.error and line.final:
        return RawValue(value.line, error=f"incomplete last line (no newline yet): {value.error}", pending=True)
    return value


def _line_values(
    line: Line,
    cutter: IdArrayCutter,
    limits: Limits,
    file: FileRef | None = None,
    messages: MessageCutter | None = None,
) -> Iterator[RawValue]:
    if line.raw is None:
        yield too_long(line.number, limits)
    else:
        yield final(parse_line(line.number, line.raw, cutter, limits, file, line.offset, messages), line)


def _standalone(line: Line, limits: Limits) -> bool:
    """Whether a line is a JSON object or array on its own (so the file is JSONL)."""
    if line.raw is None:
        return True
    if line.raw[:1] not in (b"{", b"["):
        return False
    value = parse_line(line.number, line.raw, IdArrayCutter(), limits)
    return value.error is None and isinstance(value.value, (dict, list))


def _document_or_lines(
    first: Line, second: Line, rest: Iterator[Line], cutter: IdArrayCutter, limits: Limits
) -> Iterator[RawValue]:
    """A pretty-printed document; if it does not parse, every line on its own after all."""
    lines = [first, second]
    size = len(first.raw or b"") + len(second.raw or b"")
    for line in rest:
        lines.append(line)
        size += len(line.raw or b"") + 1
        if size > limits.max_line_bytes:
            break
    whole = None
    if size <= limits.max_line_bytes and all(line.raw is not None for line in lines):
        data = b"\n".join(line.raw or b"" for line in lines)
        whole = parse_line(first.number, data, cutter, limits)
    if whole is not None and whole.error is None:
        if isinstance(whole.value, list):
            yield from _items(whole.value)
        else:
            yield whole
        return
    for line in lines:
        yield from _line_values(line, cutter, limits)
    for line in rest:
        yield from _line_values(line, cutter, limits)
