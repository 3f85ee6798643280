"""Values -> calls grouped into sessions, with a load report that accounts for every record.

Entry points: :func:`load_sources` (sources read in this process, in order, under ``limits``: the
one-process loader every other path is held to), :func:`load_source` (one source into a result),
:func:`add_value` (one value: also the live follower's), :func:`parse_or_reason`,
:func:`add_parsed` and :func:`note_unreadable`. Never raises on bad input: every record ends up
loaded or skipped with a reason (``records == loaded + skipped``). Load layer, above ``values``
(read_values) and ``formats`` (parse_value); ``files.py``, the pool and the two-part read add
their parsed records through it. docs/limits.md: the session budget and the memory cap.
"""

from __future__ import annotations

from collections.abc import Callable

from rollout_graph.core.messages import share_repeats
from rollout_graph.core.records import WARN, Call, Finding, LoadResult, SessionInput, Skipped
from rollout_graph.ingest.files.json_values import RawValue
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.formats.registry import Parsed, RecordError, parse_value
from rollout_graph.ingest.limits import (
    SESSIONS_PROBE,
    LimitExceeded,
    Limits,
    SessionBudget,
    human,
    resident_bytes,
    using,
)
from rollout_graph.ingest.load.trace_files import rollout_name
from rollout_graph.ingest.values.read import read_values

Progress = Callable[[int, int, int], None]  # (files done, files total, records so far)


def note_unreadable(result: LoadResult, unreadable: list[tuple[str, str]]) -> None:
    """Add the folders that could not be listed to a load report, as skipped (line 0)."""
    for folder, reason in unreadable:
        result.files.append(folder)
        skip_record(result, folder, 0, reason)


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
                load_source(source, result, shared_text, tick, limits)
            except OSError as exc:
                skip_record(result, source.name, 0, f"cannot read file: {exc.strerror or exc}")
            except MemoryError:
                skip_record(result, source.name, 0, "out of memory while reading this file; the rest of it is not read")
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


def load_source(
    source: Source,
    result: LoadResult,
    shared_text: dict[str, str],
    tick: Callable[[int], None],
    limits: Limits,
) -> None:
    """Add every record of ``source`` to ``result`` (``tick(records)`` every so often), stopping
    the file at ``max_memory_bytes`` or ``max_sessions`` with the reason as its last skip.

    Raises:
        OSError: the source cannot be opened.
    """
    default_session = rollout_name(source.name)
    values = read_values(source, limits)
    budget = SessionBudget(limits, source.path, len(result.sessions))  # max_sessions (docs/limits.md)
    for count, raw in enumerate(values, start=1):
        if count % PROGRESS_EVERY == 0 or count == SESSIONS_PROBE:
            tick(result.records)
            over = _over_memory(limits) or budget.check(count, len(result.sessions))
            if over:
                values.close()
                skip_record(result, source.name, raw.line, over)
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
        skip_record(result, source, raw.line, raw.error)
        return []
    parsed = parse_or_reason(raw, source, default_session)
    if isinstance(parsed, str):
        skip_record(result, source, raw.line, parsed)
        return []
    return add_parsed(result, parsed, source, raw.line, shared_text)


def parse_or_reason(raw: RawValue, source: str, default_session: str) -> Parsed | str:
    """What one parsed JSON value (``raw.error`` None) converts to, or why it is skipped; never
    raises on bad input. The pool and the two-part read call this where they parse (load/pool.py, two_parts.py)."""
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
        skip_record(result, source, line, reason)
    for call in parsed.calls:
        add_call(result, call, shared_text)
    if parsed.document is not None and parsed.calls:
        session = result.sessions[parsed.calls[0].session_id]
        session.document = parsed.document
    return parsed.calls


def skip_record(result: LoadResult, file: str, line: int, reason: str) -> None:
    """Count one record of ``file`` as skipped at ``line``, for ``reason``."""
    result.records += 1
    result.skipped.append(Skipped(file, line, reason))


def add_call(result: LoadResult, call: Call, shared_text: dict[str, str]) -> None:
    """Add one call to its session, its node id renamed when the session already holds it."""
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


def shared_texts(parsed: Parsed, shared: dict[str, str]) -> None:
    """One copy of each repeated message text of a parsed value's calls (before they cross to
    another process: the pool's workers and the two-part helper)."""
    for call in parsed.calls:
        share_repeats(call, shared)
