"""The one load path: trace files and folders -> a load report, from the cache or parsed.

Entry points: :func:`load_files` (what ``rg.load``, the command line and the app all call: the
paths walked for trace files, the cache entry of those files when there is one, else the files
read and cached), :func:`read_files` (the files parsed, no cache: two parts, the pool or this
process, whichever wins here and now) and :func:`load_paths` (the documented
``rollout_graph.load_paths``: :func:`load_files` without the cache, in this process). The top of
ingest: it calls ``cache``, ``two_parts``, ``pool`` and ``calls`` (the one-process loader every
path gives the same result as). docs/python-api.md, docs/performance.md ("The cold path").
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rollout_graph.core.records import LoadResult
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import Limits, may_exceed_sessions
from rollout_graph.ingest.load import cache, pool, two_parts
from rollout_graph.ingest.load.calls import Progress, load_sources, note_unreadable
from rollout_graph.ingest.load.progress import LoadProgress, ProgressFn, counted
from rollout_graph.ingest.load.trace_files import walk_traces
from rollout_graph.ingest.shortcuts.messages import leave_messages_in_file

__all__ = ["load_files", "load_paths", "read_files"]


def load_files(
    paths: Iterable[str | Path],
    progress: ProgressFn | None = None,
    limits: Any = None,
    workers: int | None = None,
    use_cache: bool = True,
    folder: Path | None = None,
    background_store: bool = False,
    store_delay: float = 0.0,
    defer_store: Callable[[str, LoadResult], None] | None = None,
    leave_messages: bool = False,
) -> LoadResult:
    """Trace files and folders (read recursively; unreadable folders reported as skipped), from the
    cache when these files were read before with these limits, else read (:func:`read_files`) and
    cached. Never raises on bad input.

    ``use_cache`` False reads and caches nothing; ``folder`` is the cache's folder (default:
    :func:`rollout_graph.ingest.load.cache.cache_dir`). ``workers``: None lets the load choose
    (the pool or two parts where they win), 1 reads in this process. ``background_store`` writes
    the new entry in a thread of its own (not a daemon: a process ends once the entry is complete;
    an interrupted write leaves no entry), ``store_delay`` seconds later (a process that ends
    before then writes none); ``defer_store(key, result)``, when given, is handed the entry instead
    and writes it (with :func:`rollout_graph.ingest.load.cache.store`) when it chooses: the app, after its first paint.
    ``leave_messages`` (a one-shot command) leaves request messages in plain files when nothing is
    cached (docs/performance.md, "Request messages left in the file").
    """
    files: list[Path] = []
    unreadable: list[tuple[str, str]] = []
    for p in paths:
        found, errors = walk_traces(p)
        files += found
        unreadable += errors
    result = _cached_or_read(
        files, progress, limits, workers, use_cache, folder, background_store, store_delay, defer_store, leave_messages
    )
    note_unreadable(result, unreadable)
    return result


def _cached_or_read(
    files: list[Path],
    progress: ProgressFn | None,
    limits: Any,
    workers: int | None,
    use_cache: bool,
    folder: Path | None,
    background_store: bool,
    store_delay: float,
    defer_store: Callable[[str, LoadResult], None] | None,
    leave_messages: bool,
) -> LoadResult:
    key = None
    if use_cache and (folder is not None or cache.enabled()):  # a folder given (--cache-dir) is used
        try:
            key = cache.key_for_files(files, limits)
        except OSError:  # a file vanished or cannot be read: the loader reports it
            key = None
    if key is not None:
        cached = cache.load(key, folder)
        if cached is not None:
            return cached
    if key is None and leave_messages:  # nothing will be cached: the messages can stay in the files
        with leave_messages_in_file():
            result = read_files(files, progress, workers, limits)
    else:
        result = read_files(files, progress, workers, limits)
    if key is not None and defer_store is not None:
        defer_store(key, result)
    elif key is not None and background_store:
        writer = threading.Thread(target=cache.store, args=(key, result, folder), name="rg-cache-store")
        if store_delay > 0:  # a daemon timer: waiting never holds a process that wants to end
            timer = threading.Timer(store_delay, writer.start)
            timer.daemon, timer.name = True, "rg-cache-store-timer"
            timer.start()
        else:
            writer.start()
    elif key is not None:
        cache.store(key, result, folder)
    return result


def read_files(
    files: list[Path],
    progress: ProgressFn | None = None,
    workers: int | None = None,
    limits: Any = None,
) -> LoadResult:
    """These trace files parsed, no cache: the result of :func:`rollout_graph.ingest.load.calls.load_sources`
    on them, in the same order, big ones parsed in two parts or on every core where that wins.

    ``workers``: None chooses (two parts only in the console command, with cores free now; the
    pool with at least three free cores), 2 asks for two parts, 1 reads in this process. A load
    with ``max_memory_bytes``, or one that may pass ``max_sessions``, is read in this process,
    where those are checked as records arrive.
    """
    sources = [Source.from_path(f) for f in files]
    sizes = []
    for f in files:
        try:
            sizes.append(os.path.getsize(f))
        except OSError:
            sizes.append(0)
    total = sum(sizes)
    memory_capped = limits is not None and limits.max_memory_bytes is not None
    if workers in (None, 2) and not memory_capped:  # two cores: this process and one helper
        split = two_parts.two_part_wanted(files, limits or Limits(), forced=workers == 2)
        if split is not None and not may_exceed_sessions([str(files[0])], limits or Limits()):
            return two_parts.load_two_parts(files[0], split, limits or Limits(), progress, sizes[0])
    workers = pool.planned_workers(total, limits) if workers is None else workers
    # max_sessions is checked where records are read (issue 28): a load that may pass it is sequential.
    many = workers >= 2 and may_exceed_sessions([str(f) for f in files], limits or Limits())
    if workers < 2 or total < pool.PARALLEL_MIN_BYTES or memory_capped or many:
        return _one_process(sources, progress, sizes, limits)
    return pool.read_with_pool(sources, sizes, workers, progress, limits)


def _one_process(sources: list[Source], progress: ProgressFn | None, sizes: list[int], limits: Any) -> LoadResult:
    total = sum(sizes)
    counter = [0]  # bytes read so far from the file being read

    def report(done: int, files: int, records: int) -> None:
        if progress:
            read = sum(sizes[:done]) + (min(counter[0], sizes[done]) if done < len(sizes) else 0)
            progress(LoadProgress(read, total, records, records, done, files))

    kwargs = {} if limits is None else {"limits": limits}
    sources = [counted(source, counter) for source in sources] if progress else sources
    return load_sources(sources, report, **kwargs)


def load_paths(
    paths: Iterable[str | Path], progress: Progress | None = None, limits: Limits | None = None
) -> LoadResult:
    """Load trace files and directories in this process, without the cache (see
    :func:`rollout_graph.ingest.load.calls.load_sources`); unreadable folders are skipped.
    ``progress(files_done, files_total, records_so_far)`` is called as the files are read."""

    def report(done: LoadProgress) -> None:
        if progress is not None:
            progress(done.files_done, done.files_total, done.records)

    return load_files(paths, report if progress is not None else None, limits, workers=1, use_cache=False)
