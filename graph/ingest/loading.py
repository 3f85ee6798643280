"""Files -> calls grouped into sessions, with a load report that accounts for every record."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from graph.core.records import WARN, Call, LoadResult, SessionInput, Skipped
from graph.ingest.formats import RecordError, parse_value
from graph.ingest.reading import Source, read_values

TRACE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".gz", ".zst")
# Files that travel with traces (a bundled tokenizer) but are never traces themselves.
NOT_TRACES = frozenset({"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"})
# Training-signals files (docs/signals.md) may sit beside the traces they describe; never traces.
SIGNALS_SUFFIXES = (".signals.jsonl", ".signals.parquet", ".signals.jsonl.gz", ".signals.jsonl.zst")

Progress = Callable[[int, int, int], None]  # (files done, files total, records so far)


def trace_files(path: str | Path) -> list[Path]:
    """A file as given, or every trace file under a directory (recursively, sorted)."""
    p = Path(path)
    if p.is_dir():
        return sorted(
            f
            for f in p.rglob("*")
            if f.is_file()
            and f.name.endswith(TRACE_SUFFIXES)
            and f.name not in NOT_TRACES
            and not f.name.endswith(SIGNALS_SUFFIXES)
        )
    return [p]


def rollout_name(source_name: str) -> str:
    """The session id of a file that names none: its file name without trace suffixes."""
    name = Path(source_name).name
    for suffix in (".gz", ".zst", ".jsonl", ".json", ".ndjson"):
        name = name.removesuffix(suffix)
    return name or "rollout"


def load_paths(paths: Iterable[str | Path], progress: Progress | None = None) -> LoadResult:
    sources = [Source.from_path(f) for p in paths for f in trace_files(p)]
    return load_sources(sources, progress)


def load_sources(sources: list[Source], progress: Progress | None = None) -> LoadResult:
    result = LoadResult()
    shared_text: dict[str, str] = {}
    for done, source in enumerate(sources):
        result.files.append(source.name)

        def tick(records: int, done: int = done) -> None:
            if progress:
                progress(done, len(sources), records)

        try:
            _load_source(source, result, shared_text, tick)
        except OSError as exc:
            _skip(result, source.name, 0, f"cannot read file: {exc.strerror or exc}")
        if progress:
            progress(done + 1, len(sources), result.records)
    return result


PROGRESS_EVERY = 200  # records between progress reports within a file


def _load_source(source: Source, result: LoadResult, shared_text: dict[str, str], tick: Callable[[int], None]) -> None:
    default_session = rollout_name(source.name)
    for raw in read_values(source):
        if raw.line % PROGRESS_EVERY == 0:
            tick(result.records)
        if raw.error is not None:
            _skip(result, source.name, raw.line, raw.error)
            continue
        try:
            parsed = parse_value(raw, source.name, default_session)
        except RecordError as exc:
            _skip(result, source.name, raw.line, str(exc))
            continue
        for reason in parsed.skipped:
            _skip(result, source.name, raw.line, reason)
        for call in parsed.calls:
            _add_call(result, call, shared_text)
        if parsed.document is not None and parsed.calls:
            session = result.sessions[parsed.calls[0].session_id]
            session.document = parsed.document


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
        call.node_id = f"{original}~{call.source.rsplit('/', 1)[-1]}:{call.line}"
        call.add_issue(WARN, "duplicate_node_id", f"node id {original!r} was already used in this session; renamed")
    session.node_ids.add(call.node_id)
    _share_messages(call, shared_text)
    session.calls.append(call)


def _share_messages(call: Call, shared_text: dict[str, str]) -> None:
    """Every call repeats the conversation so far; keep one copy of each message text."""
    for message in call.request_messages or ():
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = shared_text.setdefault(content, content)
