"""Files -> calls grouped into sessions, with a load report that accounts for every record."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from rollout_graph.core.messages import share_repeats
from rollout_graph.core.records import WARN, Call, Finding, LoadResult, SessionInput, Skipped
from rollout_graph.ingest.formats import Parsed, RecordError, parse_value
from rollout_graph.ingest.limits import (
    SESSIONS_PROBE,
    LimitExceeded,
    Limits,
    SessionBudget,
    human,
    resident_bytes,
    using,
)
from rollout_graph.ingest.reading import RawValue, Source, read_values

TRACE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".gz", ".zst", ".parquet", ".pkl", ".pickle", ".pt", ".pth")
# Files that travel with traces (a bundled tokenizer) but are never traces themselves.
NOTES_FILE = "rollout-graph-notes.json"  # the notes sidecar beside traces (rollout_graph.reports.notes)
NOT_TRACES = frozenset(
    {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json", NOTES_FILE}
)
# Training-signals files (docs/signals.md) may sit beside the traces they describe; never traces.
SIGNALS_SUFFIXES = (".signals.jsonl", ".signals.parquet", ".signals.jsonl.gz", ".signals.jsonl.zst")
# Nor is the capture proxy's engine probe report beside its capture file (docs/live.md).
NOT_TRACE_SUFFIXES = (*SIGNALS_SUFFIXES, ".probe.json")

Progress = Callable[[int, int, int], None]  # (files done, files total, records so far)


def trace_files(path: str | Path) -> list[Path]:
    """A file as given, or every trace file under a directory (recursively, sorted)."""
    return walk_traces(path)[0]


def walk_traces(path: str | Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """:func:`trace_files`, plus the folders that could not be listed and why.

    Only regular files are read under a directory; a FIFO, device or socket named like a trace is
    reported, never opened (opening a FIFO waits for a writer). Symlinked folders are not followed,
    so a link loop cannot hang the walk.
    """
    p = Path(path)
    if not p.is_dir():
        return [p], []
    errors: list[tuple[str, str]] = []

    def failed(exc: OSError) -> None:
        errors.append((str(exc.filename or p), f"cannot read folder: {exc.strerror or exc}"))

    found = []
    for folder, _dirs, names in os.walk(p, onerror=failed):
        for name in names:
            if name.endswith(TRACE_SUFFIXES) and name not in NOT_TRACES and not name.endswith(NOT_TRACE_SUFFIXES):
                f = Path(folder, name)
                try:
                    mode = f.stat().st_mode
                except OSError as exc:  # a dangling link, a race with deletion
                    errors.append((str(f), f"cannot read file: {exc.strerror or exc}"))
                    continue
                if stat.S_ISREG(mode):
                    found.append(f)
                elif not stat.S_ISDIR(mode):
                    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
                    errors.append((str(f), f"cannot read file: not a regular file ({kind}); skipped"))
    return sorted(found), sorted(errors)


def rollout_name(source_name: str) -> str:
    """The session id of a file that names none: its file name without trace suffixes."""
    name = Path(source_name).name
    for suffix in (".gz", ".zst", ".jsonl", ".json", ".ndjson"):
        name = name.removesuffix(suffix)
    return name or "rollout"


def load_paths(
    paths: Iterable[str | Path], progress: Progress | None = None, limits: Limits | None = None
) -> LoadResult:
    """Load trace files and directories (see :func:`load_sources`); unreadable folders are skipped."""
    sources = []
    unreadable: list[tuple[str, str]] = []
    for p in paths:
        files, errors = walk_traces(p)
        sources += [Source.from_path(f) for f in files]
        unreadable += errors
    result = load_sources(sources, progress, limits)
    note_unreadable(result, unreadable)
    return result


def note_unreadable(result: LoadResult, unreadable: list[tuple[str, str]]) -> None:
    """Add the folders that could not be listed to a load report, as skipped (line 0)."""
    for folder, reason in unreadable:
        result.files.append(folder)
        _skip(result, folder, 0, reason)


def load_sources(sources: list[Source], progress: Progress | None = None, limits: Limits | None = None) -> LoadResult:
    """Read every source under ``limits`` (the defaults without); never raises on bad input.

    Every record ends up loaded or skipped with a reason; a file that cannot be opened is one
    skipped record at line 0; a last line still being written is reported as pending.
    """
    limits = limits or Limits()
    result = LoadResult()
    shared_text: dict[str, str] = {}
    with using(limits):
        for done, source in enumerate(sources):
            result.files.append(source.name)

            def tick(records: int, done: int = done) -> None:
                if progress:
                    progress(done, len(sources), records)

            try:
                _load_source(source, result, shared_text, tick, limits)
            except OSError as exc:
                _skip(result, source.name, 0, f"cannot read file: {exc.strerror or exc}")
            except MemoryError:
                _skip(result, source.name, 0, "out of memory while reading this file; the rest of it is not read")
            if progress:
                progress(done + 1, len(sources), result.records)
    return result


PROGRESS_EVERY = 200  # records between progress reports within a file


def _over_memory(limits: Limits) -> str | None:
    if limits.max_memory_bytes is None:
        return None
    rss = resident_bytes()
    if rss is None or rss <= limits.max_memory_bytes:
        return None
    return (
        f"over a limit: resident memory {human(rss)} is above {human(limits.max_memory_bytes)} "
        "(limit max_memory_bytes, --max-memory); the rest of this file is not read"
    )


def _load_source(
    source: Source,
    result: LoadResult,
    shared_text: dict[str, str],
    tick: Callable[[int], None],
    limits: Limits,
) -> None:
    default_session = rollout_name(source.name)
    values = read_values(source, limits)
    budget = SessionBudget(limits, source.path, len(result.sessions))  # max_sessions (docs/limits.md)
    for count, raw in enumerate(values, start=1):
        if count % PROGRESS_EVERY == 0 or count == SESSIONS_PROBE:
            tick(result.records)
            over = _over_memory(limits) or budget.check(count, len(result.sessions))
            if over:
                values.close()
                _skip(result, source.name, raw.line, over)
                return
        if raw.pending:
            result.pending.append(Skipped(source.name, raw.line, raw.error or "incomplete last line"))
            continue
        add_value(result, raw, source.name, default_session, shared_text)


def add_value(
    result: LoadResult, raw: RawValue, source: str, default_session: str, shared_text: dict[str, str]
) -> list[Call]:
    """Add what one JSON value holds to ``result``: its calls, or the reason it was skipped.

    Returns the calls added (after duplicate node ids were renamed). ``shared_text`` keeps one
    copy of each message text across every value of a load; ``rollout_graph.live`` calls this per line.
    Never raises on bad input: an untrusted record must never stop a load.
    """
    if raw.error is not None:
        _skip(result, source, raw.line, raw.error)
        return []
    parsed = parse_or_reason(raw, source, default_session)
    if isinstance(parsed, str):
        _skip(result, source, raw.line, parsed)
        return []
    return add_parsed(result, parsed, source, raw.line, shared_text)


def parse_or_reason(raw: RawValue, source: str, default_session: str) -> Parsed | str:
    """What one parsed JSON value (``raw.error`` None) converts to, or why it is skipped; never
    raises on bad input. The parallel reader calls this in its worker (graph/ingest/parallel.py)."""
    try:
        return parse_value(raw, source, default_session)
    except LimitExceeded as exc:
        return f"over a limit: {exc}"
    except RecordError as exc:
        return str(exc)
    except (RecursionError, MemoryError) as exc:
        return f"cannot convert this record: {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - an untrusted record must never stop a load
        return f"cannot convert this record: {type(exc).__name__}: {exc}"[:300]


def add_parsed(result: LoadResult, parsed: Parsed, source: str, line: int, shared_text: dict[str, str]) -> list[Call]:
    """Add one value's converted calls (and its skipped parts) to ``result``, in file order."""
    for reason in parsed.skipped:
        _skip(result, source, line, reason)
    for call in parsed.calls:
        _add_call(result, call, shared_text)
    if parsed.document is not None and parsed.calls:
        session = result.sessions[parsed.calls[0].session_id]
        session.document = parsed.document
    return parsed.calls


def _skip(result: LoadResult, file: str, line: int, reason: str) -> None:
    result.records += 1
    result.skipped.append(Skipped(file, line, reason))


def _add_call(result: LoadResult, call: Call, shared_text: dict[str, str]) -> None:
    result.records += 1
    result.loaded += 1
    session = result.sessions.get(call.session_id)
    if session is None:
        session = result.sessions[call.session_id] = SessionInput(call.session_id)
    if call.node_id in session.node_ids:
        original = call.node_id
        renamed = base = f"{original}~{call.source.rsplit('/', 1)[-1]}:{call.line}"
        n = 1
        while renamed in session.node_ids:  # the new name may itself be taken
            n += 1
            renamed = f"{base}#{n}"
        call.node_id = renamed
        call.issues = [
            Finding(f.level, f.code, f.detail, node_id=renamed, leaf_id=f.leaf_id) if f.node_id == original else f
            for f in call.issues
        ]
        call.add_issue(
            WARN, "duplicate_node_id", f"node id {original!r} was already used in this session; renamed {renamed!r}"
        )
    session.node_ids.add(call.node_id)
    _share_messages(call, shared_text)
    session.calls.append(call)


def _share_messages(call: Call, shared_text: dict[str, str]) -> None:
    """Every call repeats the conversation so far; keep one copy of each message text, message
    and tool list (rollout_graph.core.messages.share_repeats)."""
    share_repeats(call, shared_text)
