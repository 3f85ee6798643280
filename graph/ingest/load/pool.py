"""Parsing big traces on every core: byte ranges of plain JSONL files across a process pool.

Entry points: :func:`planned_workers` (how many workers a load should use: 1 where the pool does
not win), :func:`read_with_pool` (files parsed by the pool, merged in file order: the one-process
loader's result), :func:`load_bytes_parallel` (uploads, each parsed whole in a worker),
:func:`split_ranges` and :func:`shutdown`. A plain file over :data:`CHUNK_BYTES` is cut at lines
that parse alone (no range is mistaken for a pretty-printed document); compressed files and
documents are parsed whole. One lazily started ``forkserver`` pool per process, sized by the cores
free for it; on a 2-core machine a load is read in one process (docs/performance.md, "Two cores").
Every limit holds as on the one-process path. Load layer: ``files.py`` chooses it.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from rollout_graph.core.records import LoadResult
from rollout_graph.ingest.files.json_values import RawValue
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.formats.registry import Parsed, RecordError, parse_value
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.load import cpu_window
from rollout_graph.ingest.load.calls import add_parsed, shared_texts, skip_record
from rollout_graph.ingest.load.file_probes import (
    PLAIN_SUFFIXES,
    RangeReader,
    holds_more_than_blanks,
    line_at,
    newlines,
    next_line,
    pread,
    standalone,
)
from rollout_graph.ingest.load.progress import LoadProgress, ProgressFn
from rollout_graph.ingest.load.trace_files import rollout_name
from rollout_graph.ingest.values.binary import is_binary
from rollout_graph.ingest.values.read import read_values

if TYPE_CHECKING:  # the process pool's modules are imported when a pool is first started
    from concurrent.futures import Future, ProcessPoolExecutor


CHUNK_BYTES = 48 << 20  # a range per task: big enough to amortise, small enough to balance


PARALLEL_MIN_BYTES = 24 << 20  # below this in total, the pool costs more than it saves


# Free cores (this process's cores minus the other running processes) the pool needs to win:
# measured on 2 cores, 2 workers lost to one on both benchmark shapes, quiet or busy (bench_cold.py).
PARALLEL_MIN_FREE_CORES = 3


@dataclass(frozen=True, slots=True)
class Task:
    """One range of one file (or one upload, whole), parsed by a worker."""

    name: str  # the source name the records carry
    path: str
    start: int
    end: int
    first_line: int  # 1-based line number of the range's first line
    default_session: str
    limits: Any = None
    data: bytes | None = None  # an upload's bytes (no file behind it)


@dataclass(slots=True)
class Outcome:
    """What one range became: per JSON value, its line and either an error or what it parsed to."""

    events: list[tuple[int, str | None, Parsed | None]] = field(default_factory=list)
    read_error: str | None = None


def planned_workers(total_bytes: int, limits: Any = None) -> int:
    """How many worker processes a load of ``total_bytes`` should use; 1 means this process alone.

    The pool only where it wins (the measured crossover, docs/performance.md): enough bytes to
    amortise it and at least :data:`PARALLEL_MIN_FREE_CORES` free cores. A resident-memory limit
    is checked in the process that reads, so such a load is never spread over workers.
    """
    if total_bytes < PARALLEL_MIN_BYTES or (limits is not None and limits.max_memory_bytes is not None):
        return 1
    free = cpu_window.free_cores()
    return int(free) if free >= PARALLEL_MIN_FREE_CORES else 1


def _range_source(task: Task) -> Source:
    if task.data is not None:
        return Source.from_bytes(task.name, task.data)
    return Source(task.name, lambda: cast(IO[bytes], RangeReader(task.path, task.start, task.end)))


def _parse_range(task: Task) -> Outcome:
    """Worker side: read one byte range and parse every value in it (no shared state)."""
    outcome = Outcome()
    shared: dict[str, str] = {}
    try:
        offset = task.first_line - 1
        for raw in read_values(_range_source(task), **_read_kwargs(task.limits)):
            line = raw.line + offset
            if raw.error is not None:
                outcome.events.append((line, raw.error, None))
                continue
            try:
                parsed = parse_value(RawValue(line, raw.value, notes=raw.notes), task.name, task.default_session)
            except RecordError as exc:
                outcome.events.append((line, str(exc), None))
                continue
            shared_texts(parsed, shared)
            outcome.events.append((line, None, parsed))
    except OSError as exc:
        outcome.read_error = f"cannot read file: {exc.strerror or exc}"
    return outcome


def _parse_whole(task: Task) -> Outcome:
    """Worker side: a compressed file or a document, through the ordinary reader."""
    outcome = Outcome()
    shared: dict[str, str] = {}
    try:
        for raw in read_values(Source.from_path(task.path), **_read_kwargs(task.limits)):
            if raw.error is not None:
                outcome.events.append((raw.line, raw.error, None))
                continue
            try:
                parsed = parse_value(raw, task.name, task.default_session)
            except RecordError as exc:
                outcome.events.append((raw.line, str(exc), None))
                continue
            shared_texts(parsed, shared)
            outcome.events.append((raw.line, None, parsed))
    except OSError as exc:
        outcome.read_error = f"cannot read file: {exc.strerror or exc}"
    return outcome


def split_ranges(
    path: str | Path, chunk: int | None = None, max_line_bytes: int | None = None
) -> list[tuple[int, int, int]]:
    """``(start, end, first_line)`` ranges of a plain JSONL file, cut at lines that parse alone.

    One range (the whole file) when the file is small, compressed-looking, or its first
    non-blank line is not a JSON value on its own (then it may be one pretty-printed document).
    A line longer than ``max_line_bytes`` is never parsed (nor copied) here: it is a line either
    way, skipped by the reader as over the limit, so a range may start at it. The file is read
    with a few small reads at each cut (the same probes as the two-part read's split) and its
    lines counted in blocks, never memory-mapped (a file truncated under a map kills the
    process: docs/limits.md).
    """
    chunk = chunk or CHUNK_BYTES
    size = os.path.getsize(path)
    whole = [(0, -1, 1)]
    if size <= chunk or not str(path).endswith(PLAIN_SUFFIXES):
        return whole
    most = size if max_line_bytes is None else max_line_bytes  # no line is longer than the file
    with open(path, "rb") as f:
        fd = f.fileno()
        if pread(fd, 4, 0).startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd")):
            return whole
        at = 0
        while True:  # the first line holding more than blanks
            line = line_at(fd, at, size, most)
            if line is None:
                return whole
            end, text = line
            if holds_more_than_blanks(fd, at, end, text):
                break
            at = end
        if text is None or not standalone(text):
            return whole  # the reader decides what an over-long first line is
        starts = [0]
        target = chunk
        while target < size:
            at = next_line(fd, target + 1, size)  # the line after the newline at or after target
            while at < size:
                line = line_at(fd, at, size, most)
                if line is None:
                    break
                end, text = line
                if holds_more_than_blanks(fd, at, end, text) and (text is None or standalone(text)):
                    break
                at = end
            if at >= size:
                break
            starts.append(at)
            target = at + chunk
        ranges = []
        line_number = 1
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else size
            ranges.append((start, end, line_number))
            line_number += newlines(fd, start, end)
        return ranges


_POOL: ProcessPoolExecutor | None = None


_POOL_LOCK = threading.Lock()


def _ready() -> int:
    return os.getpid()


@contextmanager
def _hidden_main() -> Iterator[None]:
    """Start workers without re-running the caller's main script in them.

    multiprocessing re-imports a script's ``__main__`` in every new worker (the "safe importing
    of main module" rule); a library cannot ask that of its callers, so while the workers start
    the main module is a blank one.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _pool(workers: int) -> ProcessPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["rollout_graph.ingest.load.pool"])
            with _hidden_main():
                pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
                warm = [pool.submit(_ready) for _ in range(workers)]  # each submit starts a worker
            for future in warm:
                future.result()
            _POOL = pool
            atexit.register(shutdown)
        return _POOL


def shutdown() -> None:
    """Stop the worker processes (they are started again on the next big load)."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def load_bytes_parallel(
    named: list[tuple[str, bytes]], progress: ProgressFn | None = None, limits: Any = None
) -> LoadResult:
    """In-memory files (uploads), each parsed whole in a worker process, merged in order.

    The result is the sequential loader's on ``Source.from_bytes``; the parsing never holds this
    process's interpreter, so a server stays responsive while a visitor's upload is read.
    """
    pool = _pool(max(2, cpu_window.workers_available()))
    futures = [
        pool.submit(_parse_range, Task(name, "", 0, -1, 1, rollout_name(name), limits, data)) for name, data in named
    ]
    result = LoadResult()
    shared_text: dict[str, str] = {}
    total = sum(len(data) for _, data in named)
    done = 0
    for i, ((name, data), future) in enumerate(zip(named, futures, strict=True)):
        result.files.append(name)
        outcome = _outcome(future)
        _merge(result, name, outcome, shared_text)
        if outcome.read_error is not None:
            skip_record(result, name, 0, outcome.read_error)
        done += len(data)
        if progress:
            progress(LoadProgress(done, total, result.records, result.loaded, i + 1, len(named)))
    return result


def _outcome(future: Future[Outcome]) -> Outcome:
    """A task's result; a worker that died (killed, out of memory) is that file's read error, and
    the pool is replaced for the next load."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool:
        shutdown()
        return Outcome(
            read_error="the reading process stopped (killed or out of memory); records after this point were not read"
        )


def read_with_pool(
    sources: list[Source], sizes: list[int], workers: int, progress: ProgressFn | None, limits: Any
) -> LoadResult:
    """These files parsed by ``workers`` processes (big plain files in ranges, others whole),
    merged in file order: the one-process loader's result."""
    total = sum(sizes)
    pool = _pool(workers)
    plans: list[list[tuple[Future[Outcome], int]]] = []
    for source, size in zip(sources, sizes, strict=True):
        default_session = rollout_name(source.name)
        try:
            if is_binary(source.name):
                raise ValueError("not JSON lines: read whole (rollout_graph.ingest.values.binary)")
            ranges = split_ranges(source.path or source.name, max_line_bytes=(limits or Limits()).max_line_bytes)
        except (OSError, ValueError):
            ranges = [(0, -1, 1)]
        plan = []
        for start, end, first in ranges:
            task = Task(source.name, source.path or source.name, start, end, first, default_session, limits)
            worker = _parse_whole if (start, end) == (0, -1) else _parse_range
            plan.append((pool.submit(worker, task), (size if end < 0 else end) - start))
        plans.append(plan)
    result = LoadResult()
    shared_text: dict[str, str] = {}
    done_bytes = 0
    for i, (source, plan) in enumerate(zip(sources, plans, strict=True)):
        result.files.append(source.name)
        for future, size in plan:
            outcome = _outcome(future)
            _merge(result, source.name, outcome, shared_text)
            done_bytes += size
            if progress:
                progress(LoadProgress(done_bytes, total, result.records, result.loaded, i, len(sources)))
            if outcome.read_error is not None:
                skip_record(result, source.name, 0, outcome.read_error)
                break
    return result


def _merge(result: LoadResult, name: str, outcome: Outcome, shared_text: dict[str, str]) -> None:
    """The parent side of :func:`rollout_graph.ingest.load.calls.load_source`, in file order."""
    for line, error, parsed in outcome.events:
        if error is not None:
            skip_record(result, name, line, error)
            continue
        assert parsed is not None
        add_parsed(result, parsed, name, line, shared_text)


def _read_kwargs(limits: Any) -> dict[str, Any]:
    return {} if limits is None else {"limits": limits}
