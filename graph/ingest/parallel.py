"""Parsing big traces on every core: byte ranges of plain JSONL files across a process pool.

A plain (uncompressed) JSONL file larger than :data:`CHUNK_BYTES` is cut at line starts into
ranges; each range is read and parsed (JSON, record shapes, token arrays) in a worker process, and
the parent adds the parsed records to the result in file order, exactly as the sequential loader
does (same duplicate-id renaming, same shared message texts, same load report). A range only
starts at a line that is a complete JSON value on its own, so no range is mistaken for a
pretty-printed document; a file whose first line is not one (a pretty-printed document) and
compressed files are parsed whole, in one task. Several files are parsed side by side.

Workers come from one lazily started pool per process (``forkserver``: safe in a threaded
server), sized by the cores free for it. The pool is used only where it was measured to win
(:func:`planned_workers`): on a 2-core machine the workers' start-up and the records sent back to
the parent cost more than the second core saves (docs/performance.md), so there a load is read
in this process. Small loads never start it; a one-off command stops it at exit.

**Two cores** (:func:`load_files_parallel` with ``workers=2``; without ``workers`` only in the
console command): one big plain file, read by a process with no other thread, with at least
:data:`TWO_PART_MIN_FREE_CORES` cores free *now* (:func:`free_cores_now`: /proc/stat over the
command's own start-up, sampled as it starts by ``cpu_window.mark_start``, not the 1-minute load
average), is read in two parts: this process parses
the first :data:`TWO_PART_HEAD_SHARE` of its bytes while one helper, forked at once, parses the
rest (alternatives left in the file, and request messages too where this process leaves them
there: ``message_prefix.leave_messages_in_file``; prompts' ids and small arrays sent as raw
bytes, read straight into place) and is reaped when its part has been added
(:func:`_load_two_parts`; it also dies with this process). The result is the sequential
loader's, line for line; a helper that fails is replaced by reading its part here.

Every limit holds on this path as on the sequential one: a worker reads its range through the
same chunked reader (a line longer than ``max_line_bytes`` is never held whole), and a load with
``max_memory_bytes`` is read sequentially, where the resident memory is checked as it grows.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import functools
import gc
import io
import os
import pickle
import struct
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import numpy as np

from rollout_graph.core.messages import share_repeats
from rollout_graph.core.records import LoadResult, MessagesInFile, Skipped, leave_in_file, messages_left_in_file
from rollout_graph.ingest import cpu_window, loading
from rollout_graph.ingest.cpu_window import sample as _cpu_sample
from rollout_graph.ingest.formats import Parsed, RecordError, parse_value
from rollout_graph.ingest.limits import Limits, may_exceed_sessions, using
from rollout_graph.ingest.message_prefix import MessagesSpan
from rollout_graph.ingest.reading import RawValue, Source, parse_json, read_values

if TYPE_CHECKING:  # the process pool's modules are imported when a pool is first started
    from concurrent.futures import Future, ProcessPoolExecutor

CHUNK_BYTES = 48 << 20  # a range per task: big enough to amortise, small enough to balance
PARALLEL_MIN_BYTES = 24 << 20  # below this in total, the pool costs more than it saves
# Free cores (this process's cores minus the other running processes) the pool needs to win:
# measured on 2 cores, 2 workers lost to one on both benchmark shapes, quiet or busy (bench_cold.py).
PARALLEL_MIN_FREE_CORES = 3
_PLAIN_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """How far a load has got: bytes of trace files read, records and calls parsed so far."""

    bytes_done: int
    bytes_total: int
    records: int
    calls: int
    files_done: int
    files_total: int

    def describe(self) -> str:
        """``"312 of 946 MB read, 1,650 calls"``."""
        total = max(self.bytes_total, 1)
        return (
            f"{self.bytes_done / 1e6:,.0f} of {total / 1e6:,.0f} MB read · {self.calls:,} calls"
            f" · file {min(self.files_done + 1, self.files_total)} of {self.files_total}"
        )


ProgressFn = Callable[[LoadProgress], None]


@dataclass(frozen=True, slots=True)
class _Task:
    name: str  # the source name the records carry
    path: str
    start: int
    end: int
    first_line: int  # 1-based line number of the range's first line
    default_session: str
    limits: Any = None
    data: bytes | None = None  # an upload's bytes (no file behind it)


@dataclass(slots=True)
class _Outcome:
    """What one range became: per JSON value, its line and either an error or what it parsed to."""

    events: list[tuple[int, str | None, Parsed | None]] = field(default_factory=list)
    read_error: str | None = None


def workers_available() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def free_cores() -> float:
    """Cores this process may use minus the other processes running (1-minute load average,
    this process counted as one of them)."""
    cores = workers_available()
    try:
        others = max(0.0, os.getloadavg()[0] - 1.0)
    except OSError:  # no load average on this platform
        others = 0.0
    return max(0.0, cores - others)


def planned_workers(total_bytes: int, limits: Any = None) -> int:
    """How many worker processes a load of ``total_bytes`` should use; 1 means this process alone.

    The pool only where it wins (the measured crossover, docs/performance.md): enough bytes to
    amortise it and at least :data:`PARALLEL_MIN_FREE_CORES` free cores. A resident-memory limit
    is checked in the process that reads, so such a load is never spread over workers.
    """
    if total_bytes < PARALLEL_MIN_BYTES or (limits is not None and limits.max_memory_bytes is not None):
        return 1
    free = free_cores()
    return int(free) if free >= PARALLEL_MIN_FREE_CORES else 1


class _RangeReader(io.RawIOBase):
    """``[start, end)`` of a file as a stream: a worker reads its range in chunks, never whole."""

    def __init__(self, path: str, start: int, end: int) -> None:
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed with the stream
        self._file.seek(start)
        self._left = end - start if end >= 0 else -1

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        want = len(view) if self._left < 0 else min(len(view), self._left)
        if want == 0:
            return 0
        n = self._file.readinto(view[:want]) or 0
        if self._left >= 0:
            self._left -= n
        return n

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._left if self._left >= 0 else 1 << 62
        want = size if self._left < 0 else min(size, self._left)
        data = self._file.read(want) if want > 0 else b""
        if self._left >= 0:
            self._left -= len(data)
        return data

    def close(self) -> None:
        self._file.close()
        super().close()


def _range_source(task: _Task) -> Source:
    if task.data is not None:
        return Source.from_bytes(task.name, task.data)
    return Source(task.name, lambda: cast(IO[bytes], _RangeReader(task.path, task.start, task.end)))


def _read_kwargs(limits: Any) -> dict[str, Any]:
    return {} if limits is None else {"limits": limits}


def _shared_texts(parsed: Parsed, shared: dict[str, str]) -> None:
    """One copy of each repeated message text before the result crosses to the parent."""
    for call in parsed.calls:
        share_repeats(call, shared)


def _parse_range(task: _Task) -> _Outcome:
    """Worker side: read one byte range and parse every value in it (no shared state)."""
    outcome = _Outcome()
    shared: dict[str, str] = {}
    try:
        offset = task.first_line - 1
        for raw in read_values(_range_source(task), **_read_kwargs(task.limits)):
            line = raw.line + offset
            if raw.error is not None:
                outcome.events.append((line, raw.error, None))
                continue
            try:
                parsed = parse_value(RawValue(line, raw.value), task.name, task.default_session)
            except RecordError as exc:
                outcome.events.append((line, str(exc), None))
                continue
            _shared_texts(parsed, shared)
            outcome.events.append((line, None, parsed))
    except OSError as exc:
        outcome.read_error = f"cannot read file: {exc.strerror or exc}"
    return outcome


def _parse_whole(task: _Task) -> _Outcome:
    """Worker side: a compressed file or a document, through the ordinary reader."""
    outcome = _Outcome()
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
            _shared_texts(parsed, shared)
            outcome.events.append((raw.line, None, parsed))
    except OSError as exc:
        outcome.read_error = f"cannot read file: {exc.strerror or exc}"
    return outcome


def _standalone(line: bytes) -> bool:
    try:
        parse_json(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return True


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
    if size <= chunk or not str(path).endswith(_PLAIN_SUFFIXES):
        return whole
    most = size if max_line_bytes is None else max_line_bytes  # no line is longer than the file
    with open(path, "rb") as f:
        fd = f.fileno()
        if _pread(fd, 4, 0).startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd")):
            return whole
        at = 0
        while True:  # the first line holding more than blanks
            line = _line_at(fd, at, size, most)
            if line is None:
                return whole
            end, text = line
            if _holds_more_than_blanks(fd, at, end, text):
                break
            at = end
        if text is None or not _standalone(text):
            return whole  # the reader decides what an over-long first line is
        starts = [0]
        target = chunk
        while target < size:
            at = _next_line(fd, target + 1, size)  # the line after the newline at or after target
            while at < size:
                line = _line_at(fd, at, size, most)
                if line is None:
                    break
                end, text = line
                if _holds_more_than_blanks(fd, at, end, text) and (text is None or _standalone(text)):
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
            line_number += _newlines(fd, start, end)
        return ranges


def _holds_more_than_blanks(fd: int, start: int, end: int, text: bytes | None) -> bool:
    """Whether the line at ``start`` (the next one at ``end``; ``text`` its bytes, None when it
    was too long to hold) holds more than blanks; a long one is probed a block at a time."""
    if text is not None:
        return bool(text.strip())
    at = start
    while at < end:
        block = _pread(fd, min(_PROBE_BYTES, end - at), at)
        if not block:
            return False
        if block.strip():
            return True
        at += len(block)
    return False


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
            context.set_forkserver_preload(["rollout_graph.ingest.parallel"])
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


def load_files_parallel(
    files: list[Path],
    progress: ProgressFn | None = None,
    workers: int | None = None,
    limits: Any = None,
) -> LoadResult:
    """Like :func:`rollout_graph.ingest.loading.load_sources` on these files, big ones parsed on every core.

    The result is the same as the sequential loader's, in the same order.
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
        split = _two_part_wanted(files, limits or Limits(), forced=workers == 2)
        if split is not None and not may_exceed_sessions([str(files[0])], limits or Limits()):
            return _load_two_parts(files[0], split, limits or Limits(), progress, sizes[0])
    workers = planned_workers(total, limits) if workers is None else workers
    # max_sessions is checked where records are read (issue 28): a load that may pass it is sequential.
    many = workers >= 2 and may_exceed_sessions([str(f) for f in files], limits or Limits())
    if workers < 2 or total < PARALLEL_MIN_BYTES or memory_capped or many:
        return _sequential(sources, progress, sizes, limits)
    pool = _pool(workers)
    plans: list[list[tuple[Future[_Outcome], int]]] = []
    for source, size in zip(sources, sizes, strict=True):
        default_session = loading.rollout_name(source.name)
        try:
            if source.name.lower().endswith((".parquet", ".pkl", ".pickle", ".pt", ".pth")):
                raise ValueError("not JSON lines: read whole (rollout_graph.ingest.formats.binary_files)")
            ranges = split_ranges(source.path or source.name, max_line_bytes=(limits or Limits()).max_line_bytes)
        except (OSError, ValueError):
            ranges = [(0, -1, 1)]
        plan = []
        for start, end, first in ranges:
            task = _Task(source.name, source.path or source.name, start, end, first, default_session, limits)
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
                loading._skip(result, source.name, 0, outcome.read_error)
                break
    return result


def load_bytes_parallel(
    named: list[tuple[str, bytes]], progress: ProgressFn | None = None, limits: Any = None
) -> LoadResult:
    """In-memory files (uploads), each parsed whole in a worker process, merged in order.

    The result is the sequential loader's on ``Source.from_bytes``; the parsing never holds this
    process's interpreter, so a server stays responsive while a visitor's upload is read.
    """
    pool = _pool(max(2, workers_available()))
    futures = [
        pool.submit(_parse_range, _Task(name, "", 0, -1, 1, loading.rollout_name(name), limits, data))
        for name, data in named
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
            loading._skip(result, name, 0, outcome.read_error)
        done += len(data)
        if progress:
            progress(LoadProgress(done, total, result.records, result.loaded, i + 1, len(named)))
    return result


def _outcome(future: Future[_Outcome]) -> _Outcome:
    """A task's result; a worker that died (killed, out of memory) is that file's read error, and
    the pool is replaced for the next load."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool:
        shutdown()
        return _Outcome(
            read_error="the reading process stopped (killed or out of memory); records after this point were not read"
        )


def _merge(result: LoadResult, name: str, outcome: _Outcome, shared_text: dict[str, str]) -> None:
    """The parent side of :func:`rollout_graph.ingest.loading._load_source`, in file order."""
    for line, error, parsed in outcome.events:
        if error is not None:
            loading._skip(result, name, line, error)
            continue
        assert parsed is not None
        for reason in parsed.skipped:
            loading._skip(result, name, line, reason)
        for call in parsed.calls:
            loading._add_call(result, call, shared_text)
        if parsed.document is not None and parsed.calls:
            result.sessions[parsed.calls[0].session_id].document = parsed.document


class _CountedReads:
    """A source's stream that adds the bytes read from it to a counter (progress in bytes)."""

    def __init__(self, stream: IO[bytes], counter: list[int]) -> None:
        self._stream = stream
        self._counter = counter

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._counter[0] += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        """Into ``buffer`` (the line reader's reused one: reading._reused_chunks), counted too."""
        n = getattr(self._stream, "readinto")(buffer) or 0  # noqa: B009 - IO[bytes] does not declare it
        self._counter[0] += n
        return n

    def close(self) -> None:
        self._stream.close()

    def fileno(self) -> int:
        """The file's descriptor: a plain file's lines can be read back (graph/ingest/typed.py)."""
        return self._stream.fileno()

    def __enter__(self) -> _CountedReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _counted(source: Source, counter: list[int]) -> Source:
    def opened() -> IO[bytes]:
        counter[0] = 0
        return cast(IO[bytes], _CountedReads(source.open(), counter))

    return Source(source.name, opened, source.path)  # the path too: max_sessions projects from it


def _sequential(sources: list[Source], progress: ProgressFn | None, sizes: list[int], limits: Any) -> LoadResult:
    total = sum(sizes)
    counter = [0]  # bytes read so far from the file being read

    def report(done: int, files: int, records: int) -> None:
        if progress:
            read = sum(sizes[:done]) + (min(counter[0], sizes[done]) if done < len(sizes) else 0)
            progress(LoadProgress(read, total, records, records, done, files))

    kwargs = _read_kwargs(limits)
    counted = [_counted(source, counter) for source in sources] if progress else sources
    return loading.load_sources(counted, report, **kwargs)


# --- two cores: this process and one forked helper -------------------------------------------
#
# On a 2-core machine a pool of two workers lost to one process (their start-up, the decoded
# alternatives and the prompts pickled one by one cost more than the second core gave back). The
# two-part read keeps this process busy on the file's first part while ONE helper, forked at
# once, parses the rest: the helper leaves the alternatives in the file (a DeferredTop holds a
# FileRef and offsets), and the request messages when the command leaves them there (a
# MessagesSpan crosses as where they are, never their values: the parent's peak stays the
# one-process load's, within 8 bytes a token), and sends the spans of each id arena its prompts
# cover as raw bytes (a prompt is an offset into it), so the parent only unpickles calls and
# views (docs/performance.md, "Two cores").

# Below this the helper's fork, line count and transfer eat what its part saves. With the C
# speedups a quiet machine's two parts win from the smallest file measured (bench_two_cores.py,
# 2026-12-02: 56 MB flat 0.92x the floor against 1.01x in one process; 97 MB vllm 0.87 against
# 1.02; the 225 MB flat trace 0.61 against 0.77): docs/performance.md, "Two cores".
TWO_PART_MIN_BYTES = 64 << 20
# Cores free for the helper, measured now (free_cores_now over the console command's start-up:
# cpu_window.mark_start), that the two-part read needs to be used without being asked (workers=2).
# On a quiet machine it wins (bench_two_cores.py, load 0.2-0.6: 0.99x the floor against 1.24x);
# with a core busy it loses (1.33x against 1.17x), and there a spinning process is about 1 core of
# the window: 1.5 parts the two. Its peak is within the memory goal (104 MB = 7.9 bytes a token on
# the vLLM benchmark trace; one process 102 MB). A library process never judges (no start sample):
# it reads in one process unless it asks. docs/performance.md, "Two cores".
TWO_PART_MIN_FREE_CORES = 1.5
# The share of the file's bytes the parent parses itself: the larger part, as the helper also
# counts its first line number and packs its calls (measured: both parts' CPU match).
TWO_PART_HEAD_SHARE = {"plain": 0.56}
_PIPE_BYTES = 1 << 20


# Seconds of /proc/stat a judgement needs; shorter, or longer than _MAX_WINDOW (a long-running
# process: the window's average would lag), the running-task count of this instant decides.
_MIN_WINDOW, _MAX_WINDOW = 0.05, 5.0


def _running_others() -> float | None:
    """Other processes running right now (/proc/loadavg's running-task count, minus this one)."""
    try:
        with open("/proc/loadavg", "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, running - 1.0)


def free_cores_now(since: cpu_window.Sample | None) -> float:
    """Cores this process may use minus what other processes use now (docs/performance.md,
    "Two cores": the rule).

    On Linux: the machine's busy CPU time (/proc/stat) since ``since`` (a :func:`cpu_window.sample`;
    the console command's is taken as it starts, so the window is its own start-up and costs no
    waiting) minus this process's own CPU time over the same window, per second of it. A window shorter than 50 ms
    or longer than 5 s (a process that started long ago: its average would lag) takes
    /proc/loadavg's count of tasks running at this instant instead, this one not counted. Off
    Linux: the 1-minute load average (:func:`free_cores`), the only figure there is.
    """
    cores = workers_available()
    now = _cpu_sample()
    if since is not None and now is not None and _MIN_WINDOW <= now[0] - since[0] <= _MAX_WINDOW:
        busy = (now[1] - since[1]) - (now[2] - since[2])
        others = max(0.0, busy / (now[0] - since[0]))
        return max(0.0, cores - others)
    others_now = _running_others()
    if others_now is not None:
        return max(0.0, cores - others_now)
    return free_cores()


def _two_part_split(path: str, size: int, limits: Limits, forced: bool = False) -> int | None:
    """Where the parent's part ends (a line start), or None: this file is read in one process.

    A plain JSONL file of at least :data:`TWO_PART_MIN_BYTES` (and within ``max_file_bytes``, a
    limit counted over the whole stream) whose first line is a JSON value on its own; the split
    is the first line at or after :data:`TWO_PART_HEAD_SHARE` of its bytes that is a JSON value
    on its own (as :func:`split_ranges` cuts), and the parent's part holds at least two lines (the
    reader's first-line rules see what they see in the whole file). The file is probed with a few
    small reads, never mapped: a mapped file's pages would count in this process's memory.
    """
    small = size < TWO_PART_MIN_BYTES and not forced
    if small or size > limits.max_file_bytes or not path.endswith(_PLAIN_SUFFIXES):
        return None
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            if _pread(fd, 4, 0).startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd")):
                return None
            first = _line_at(fd, _next_nonblank(fd, 0, size), size, limits.max_line_bytes)
            if first is None or not first[1] or not _standalone(first[1]):
                return None
            second = _next_nonblank(fd, first[0], size)
            target = int(size * TWO_PART_HEAD_SHARE["plain"])
            at = _next_line(fd, max(target, second + 1), size)
            while at < size:
                line = _line_at(fd, at, size, limits.max_line_bytes)
                if line is None:
                    return None
                end, text = line
                if text is None or (text.strip() and _standalone(text)):
                    return at if at > second else None
                at = end
    except OSError:
        return None
    return None


_PROBE_BYTES = 1 << 16


def _pread(fd: int, n: int, at: int) -> bytes:
    """Up to ``n`` bytes of the open file ``fd`` from offset ``at`` (a descriptor of this call's own)."""
    if hasattr(os, "pread"):
        return os.pread(fd, n, at)
    os.lseek(fd, at, os.SEEK_SET)  # Windows: no positional read
    return os.read(fd, n)


def _next_line(fd: int, pos: int, size: int) -> int:
    """The start of the first line beginning after ``pos - 1`` (``pos`` itself when a line starts there)."""
    if pos <= 0:
        return 0
    at = pos - 1
    while at < size:
        block = _pread(fd, _PROBE_BYTES, at)
        if not block:
            break
        i = block.find(b"\n")
        if i >= 0:
            return at + i + 1
        at += len(block)
    return size


def _next_nonblank(fd: int, pos: int, size: int) -> int:
    """The start of the first line at or after the line start ``pos`` holding more than blanks."""
    line_start = pos
    while pos < size:
        block = _pread(fd, _PROBE_BYTES, pos)
        if not block:
            break
        stripped = block.lstrip(b" \t\r\n")
        skipped = block[: len(block) - len(stripped)]
        newline = skipped.rfind(b"\n")
        if newline >= 0:
            line_start = pos + newline + 1
        if stripped:
            return line_start
        pos += len(block)
    return size


def _line_at(fd: int, start: int, size: int, max_line: int) -> tuple[int, bytes | None] | None:
    """``(start of the next line, the line's bytes)`` of the line at ``start``; the bytes are None
    when the line is longer than ``max_line`` (never held whole). None at the end of the file."""
    if start >= size:
        return None
    pieces: list[bytes] = []
    held = 0
    at = start
    while at < size:
        block = _pread(fd, _PROBE_BYTES, at)
        if not block:
            break
        i = block.find(b"\n")
        part = block if i < 0 else block[:i]
        held += len(part)
        if held <= max_line:
            pieces.append(part)
        if i >= 0:
            return at + i + 1, b"".join(pieces) if held <= max_line else None
        at += len(block)
    return size, b"".join(pieces) if held <= max_line else None


def _single_threaded() -> bool:
    """Whether this process runs no other thread (only such a process is forked)."""
    return threading.active_count() == 1


def _two_part_wanted(files: list[Path], limits: Limits, forced: bool = False) -> int | None:
    """The split offset when this load is one big plain file worth two parts here and now
    (``forced``: whatever the free cores, the file and this process permitting)."""
    if len(files) != 1 or not hasattr(os, "fork") or not sys.platform.startswith("linux"):
        return None
    if not _single_threaded():
        return None  # forking a threaded process is unsafe: a server reads in one process
    try:
        size = os.path.getsize(files[0])
    except OSError:
        return None
    if not forced and (size < TWO_PART_MIN_BYTES or workers_available() < 2):
        return None
    if not forced and not _console_judges_free_cores():
        return None
    return _two_part_split(str(files[0]), size, limits, forced)


def _console_judges_free_cores() -> bool:
    """Whether the cores free now allow the two-part read without being asked: only in the console
    command, which samples the machine's CPU as it starts (``cpu_window.mark_start``), so the
    window is its own start-up (about 0.1 s of imports); a library process (a notebook, a script)
    reads in one process unless it asks (``workers=2``)."""
    if TWO_PART_MIN_FREE_CORES <= 0:
        return True  # asked for whatever the cores (what tests and benchmarks set)
    return cpu_window.START is not None and free_cores_now(cpu_window.START) >= TWO_PART_MIN_FREE_CORES


class _HeadReader(_RangeReader):
    """The parent's part of the file, with the file's descriptor (alternatives are read back)."""

    def fileno(self) -> int:
        return self._file.fileno()


def _detached(parsed: Parsed) -> list[MessagesInFile | None] | None:
    """The request messages of ``parsed``'s calls that are left in the file (one per call, None
    where a call holds its list), taken off the calls (None: no call has any). The parent puts
    them back once the calls are added (:func:`_add_tail`): the load's message sharing then never
    reads them from the file, as the one-process load never does."""
    left = [messages_left_in_file(call) for call in parsed.calls]
    if not any(left):
        return None
    for call, span in zip(parsed.calls, left, strict=True):
        if span is not None:
            call.request_messages = None
    return left


def _tail_events(path: str, name: str, start: int, first_line: int, limits: Limits) -> list[tuple[int, str, Any]]:
    """The values of ``path`` from byte ``start`` (a line start, line ``first_line``) as events
    ``(line, kind, payload)``: kind ``"p"`` a pending last line (payload: its reason), ``"s"``
    skipped (the reason), ``"v"`` a converted value (a Parsed, and its calls' request messages
    left in the file: :func:`_detached`). Each line is read as the sequential reader reads every
    line after a file's first (``reading._line_values``), its alternatives and request messages
    left in the file at their offsets in it (the messages when the caller leaves them there:
    ``message_prefix.leave_messages_in_file``, a context the forked helper inherits)."""
    from rollout_graph.ingest import reading
    from rollout_graph.ingest.id_arrays import IdArrayCutter
    from rollout_graph.ingest.message_prefix import MessageCutter
    from rollout_graph.ingest.typed import FileRef

    default_session = loading.rollout_name(name)
    events: list[tuple[int, str, Any]] = []
    cutter, messages = IdArrayCutter(), MessageCutter()
    shared: dict[str, str] = {}
    shift = first_line - 1
    seen = reading._Counter()
    with using(limits), _HeadReader(path, start, -1) as stream:
        file = FileRef.of(stream.fileno(), path)
        lines = reading._split(reading._chunks(cast(IO[bytes], stream), limits, seen), limits.max_line_bytes, seen)
        try:
            for line in lines:
                number = line.number + shift
                if line.raw is None:
                    raw = reading._too_long(number, limits)
                else:
                    at = line.offset + start if line.offset >= 0 else -1
                    value = reading.parse_line(number, line.raw, cutter, limits, file, at, messages)
                    raw = reading._final(value, line)
                if raw.pending:
                    events.append((raw.line, "p", raw.error or "incomplete last line"))
                elif raw.error is not None:
                    events.append((raw.line, "s", raw.error))
                else:
                    parsed = loading.parse_or_reason(raw, name, default_session)
                    if isinstance(parsed, str):
                        events.append((raw.line, "s", parsed))
                    else:
                        _shared_texts(parsed, shared)  # one copy of each repeated text crosses
                        events.append((raw.line, "v", (parsed, _detached(parsed))))
        except (reading.StreamBreak, OSError) as exc:
            n = seen.newlines + shift
            why = str(exc) if isinstance(exc, reading.StreamBreak) else exc.strerror or str(exc)
            events.append((n + 1, "s", f"stream stopped after line {n}: {why}"))
    return events


# The helper's result crosses the pipe in three parts (_send, _receive): a header naming each id
# arena's extent and the spans of it the helper's prompts cover; those spans' raw bytes, read by
# the parent straight into a fresh arena (no bytes object of them is ever made on either side);
# then the events, pickled by _Packer, each prompt that is a view of an arena as (arena, start,
# length), rebuilt as a read-only view of the parent's copy (what the sequential loader's prompts
# are), and each request-messages span as where it is, not its values. The stream is this
# library's own, between a process and the helper it forked: never a trace's bytes.


def _received_arena(index: int) -> np.ndarray:
    """The ``index``-th arena of a helper's stream: only :class:`_Unpacker` resolves it."""
    raise pickle.UnpicklingError("an id arena of the two-part read outside the stream that carried it")


def _received_array(at: int, dtype: Any, shape: tuple[int, ...], writeable: bool) -> np.ndarray:
    """An array from a helper stream's side bytes: only :class:`_Unpacker` resolves it."""
    raise pickle.UnpicklingError("an array of the two-part read outside the stream that carried it")


def _arena_view(arena: np.ndarray, start: int, n: int) -> np.ndarray:
    view = arena[start : start + n]
    view.flags.writeable = False
    return view


class _Packer(pickle.Pickler):
    """Pickles the helper's events: each arena as its index in the stream's header, each view of
    one inside the spans that cross as (arena, start, length), each MessagesSpan as itself."""

    def __init__(self, file: IO[bytes], spans: dict[int, list[tuple[int, int]]], index: dict[int, int]) -> None:
        super().__init__(file, protocol=5)
        self._spans = spans  # id(arena) -> the merged (start, end) spans of ids that cross
        self._starts = {key: [a for a, _ in v] for key, v in spans.items()}
        self._index = index  # id(arena) -> its place in the header
        self.side: list[memoryview] = []  # small arrays' bytes, sent after the arenas' spans
        self.side_bytes = 0

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is MessagesSpan:  # where the messages are, not their values (its own reduce)
            return MessagesSpan, (obj.file, obj.offset, obj.length, obj.count, obj.check)
        if type(obj) is not np.ndarray:
            return NotImplemented
        key = id(obj)
        if key in self._index:  # the arena itself: its spans went ahead of the pickle
            return _received_arena, (self._index[key],)
        base = obj.base
        if type(base) is not np.ndarray or obj.dtype != np.int32 or obj.ndim != 1 or obj.strides != (4,):
            return self._owned(obj)
        spans = self._spans.get(id(base))
        if spans is None:
            return self._owned(obj)
        start = (obj.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // 4
        end = start + obj.shape[0]
        i = bisect.bisect_right(self._starts[id(base)], start) - 1
        if i < 0 or start < spans[i][0] or end > spans[i][1]:
            return self._owned(obj)  # not inside a span that crosses: its own copy
        return _arena_view, (base, start, obj.shape[0])

    def _owned(self, obj: np.ndarray) -> Any:
        """A small array of numbers (sampled ids, logprobs) as its place in the side bytes,
        rebuilt as an array owning its data, as the one-process reader's are (numpy's own reduce
        leaves each a view of a bytes object of its own, kept alive by the unpickler until the
        end: a few hundred bytes more per array). Anything else: numpy's reduce."""
        if obj.dtype.hasobject or not obj.flags.c_contiguous or obj.nbytes > _OWNED_MOST:
            return NotImplemented
        at = self.side_bytes
        if obj.nbytes:
            self.side.append(obj.data.cast("B"))
            self.side_bytes += obj.nbytes
        return _received_array, (at, obj.dtype, obj.shape, obj.flags.writeable)


_OWNED_MOST = 1 << 16  # bytes; a larger array crosses as numpy pickles it


class _Unpacker(pickle.Unpickler):
    """Reads what :class:`_Packer` wrote, its arenas those the stream's header announced."""

    def __init__(self, file: IO[bytes], arenas: list[np.ndarray], side: bytearray) -> None:
        super().__init__(file)
        # What find_class hands out goes into the unpickler's memo, so it must not refer to the
        # unpickler (a cycle: the memo, every object unpickled, would wait for the collector,
        # which a command runs without)
        self._arena_at = arenas.__getitem__
        self._array_at = functools.partial(_array_in, side)

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_received_arena":
            return self._arena_at
        if module == __name__ and name == "_received_array":
            return self._array_at
        return super().find_class(module, name)


def _array_in(side: bytearray, at: int, dtype: Any, shape: tuple[int, ...], writeable: bool) -> np.ndarray:
    """The array of ``shape`` at byte ``at`` of a helper stream's side bytes, owning its data."""
    count = int(np.prod(shape))
    if count == 0:
        array = np.empty(shape, dtype=dtype)
    else:
        array = np.frombuffer(side, dtype=dtype, count=count, offset=at).reshape(shape).copy()
    array.flags.writeable = writeable
    return array


_HEADER = struct.Struct("<Q")


def _send(
    out: IO[bytes],
    value: Any,
    arenas: dict[int, np.ndarray],
    extents: dict[int, int],
    spans: dict[int, list[tuple[int, int]]],
) -> None:
    """Write ``value`` for :func:`_receive`: ``arenas`` (id -> arena) cross as the ``spans`` of
    their first ``extents`` ids. The value is pickled first (the helper's CPU, while the parent
    still reads its own part), then the header, the spans' bytes and the pickle are written."""
    keys = [key for key in extents if key in arenas]
    body = io.BytesIO()
    packer = _Packer(body, {key: spans[key] for key in keys}, {key: i for i, key in enumerate(keys)})
    packer.dump(value)
    header = pickle.dumps(([(extents[key], spans[key]) for key in keys], packer.side_bytes), protocol=5)
    out.write(_HEADER.pack(len(header)))
    out.write(header)
    for key in keys:
        arena = arenas[key]
        for a, b in spans[key]:
            if b > a:
                out.write(arena[a:b].data.cast("B"))
    for piece in packer.side:
        out.write(piece)
    out.write(body.getbuffer())


def _read_into(stream: IO[bytes], view: memoryview) -> None:
    done = 0
    while done < len(view):
        n = stream.readinto(view[done:])  # type: ignore[attr-defined]
        if not n:
            raise EOFError("the helper's stream ended early")
        done += n


def _receive(stream: IO[bytes]) -> Any:
    """What :func:`_send` wrote: each arena rebuilt in fresh anonymous memory
    (id_arrays._new_arena: the room between the spans stays unresident, as in the helper's
    own arena), its spans read straight into it, then the value unpickled."""
    from rollout_graph.ingest import id_arrays

    size = bytearray(_HEADER.size)
    _read_into(stream, memoryview(size))
    header = bytearray(_HEADER.unpack(size)[0])
    _read_into(stream, memoryview(header))
    arenas = []
    announced, side_bytes = pickle.loads(header)
    for extent, spans in announced:
        arena = id_arrays._new_arena(max(1, extent))  # registered: held_bytes counts its views once
        for a, b in spans:
            if b > a:
                _read_into(stream, arena[a:b].data.cast("B"))
        arenas.append(arena)
    side = bytearray(side_bytes)
    _read_into(stream, memoryview(side))
    return _Unpacker(stream, arenas, side).load()


def _extents(
    arenas: dict[int, np.ndarray], events: list[tuple[int, str, Any]]
) -> tuple[dict[int, int], dict[int, list[tuple[int, int]]]]:
    """For each of ``arenas`` (the helper's: id -> arena), the end of the last prompt in it and
    the merged spans its prompts cover: only those ids cross. Any other view (an array of a
    document) lies outside them and crosses as a plain array."""
    covered: dict[int, list[tuple[int, int]]] = {key: [] for key in arenas}
    for _line, kind, payload in events:
        if kind != "v":
            continue
        for call in payload[0].calls:
            ids = call.prompt_ids
            base = None if ids is None else ids.base
            if base is not None and id(base) in covered and arenas[id(base)] is base and ids.shape[0]:
                start = (ids.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // 4
                covered[id(base)].append((start, start + ids.shape[0]))
    extents: dict[int, int] = {}
    spans: dict[int, list[tuple[int, int]]] = {}
    for key, intervals in covered.items():
        merged: list[tuple[int, int]] = []
        for a, b in sorted(intervals):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        extents[key] = merged[-1][1] if merged else 0
        spans[key] = merged
    return extents, spans


_COUNT_WINDOW = 1 << 20  # bytes of the file read at a time while counting its lines (measured: 1 MB as fast as 16)


def _lines_before(path: str, offset: int) -> int:
    """1 + the newlines in the file's first ``offset`` bytes: the line number at ``offset`` (a
    file shorter than ``offset`` by now counts what it still holds)."""
    with open(path, "rb", buffering=0) as f:
        return _newlines(f.fileno(), 0, offset) + 1


def _newlines(fd: int, start: int, end: int) -> int:
    """The newlines in bytes ``[start, end)`` of the open file ``fd``, counted one block
    (:data:`_COUNT_WINDOW`) at a time into one reused buffer (never a memory map: a file truncated under one kills the
    process, docs/limits.md); a file that ends sooner by now counts what it holds."""
    count = 0
    buffer = bytearray(min(_COUNT_WINDOW, max(end - start, 1)))
    view = memoryview(buffer)
    at = start
    positional = hasattr(os, "preadv")
    while at < end:
        want = min(len(buffer), end - at)
        if positional:
            n = os.preadv(fd, [view[:want]], at)
            count += buffer.count(b"\n", 0, n)
        else:  # Windows: no positional read into a buffer
            block = _pread(fd, want, at)
            n = len(block)
            count += block.count(b"\n")
        if not n:
            break
        at += n
    return count


class _Helper:
    """One forked process parsing the file's tail; its events are read once, then it is reaped."""

    def __init__(self, path: str, name: str, start: int, limits: Limits) -> None:
        from rollout_graph.ingest import id_arrays

        before = set(id_arrays._ARENAS.keys())
        read_end, write_end = os.pipe()
        with contextlib.suppress(OSError, AttributeError, ImportError):  # fewer, larger copies through the pipe
            import fcntl

            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        pid = os.fork()
        if pid == 0:  # the helper: never returns
            code = 1
            try:
                os.close(read_end)
                _die_with_parent()
                gc.disable()  # a short-lived process: the collector's passes only cost it time
                events = _tail_events(path, name, start, _lines_before(path, start), limits)
                arenas = {key: arena for key, arena in list(id_arrays._ARENAS.items()) if key not in before}
                with open(write_end, "wb", closefd=True) as out:
                    _send(out, events, arenas, *_extents(arenas, events))
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        self.pid: int | None = pid
        self._read = read_end

    def events(self) -> list[tuple[int, str, Any]] | None:
        """The helper's events, or None if it failed (died, killed): the caller reads the tail itself."""
        collecting = gc.isenabled()
        gc.disable()  # unpickling makes many objects at once: the collector's passes would double its time
        complete = False
        try:
            read, self._read = self._read, -1
            with open(read, "rb", closefd=True) as stream:
                events = _receive(cast(IO[bytes], stream))
                # the whole stream, and nothing after it: the helper closed its end, it is exiting
                complete = stream.read(1) == b""
        except Exception:  # noqa: BLE001 - a helper that died mid-write: read the tail here instead
            events = None
        finally:
            if collecting:
                gc.enable()
        # once the stream is complete the helper only exits: wait for it (killing it then would
        # throw its part away, to be read again here)
        status = self.reap(wait=complete)
        return events if complete and status == 0 else None

    def reap(self, wait: bool = False) -> int | None:
        """Wait for the helper to end (``wait``: however long it takes; else killing it first if
        it still runs); its exit status."""
        pid, self.pid = self.pid, None
        if pid is None:
            return None
        if self._read >= 0:
            with contextlib.suppress(OSError):
                os.close(self._read)
            self._read = -1
        try:
            done, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
            if done == 0:
                import signal  # only here and in the helper: a one-process load never imports it

                os.kill(pid, signal.SIGKILL)
                done, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return None
        return os.waitstatus_to_exitcode(status)


def _die_with_parent() -> None:
    """The helper ends when the process that forked it does (Linux ``PR_SET_PDEATHSIG``)."""
    parent = os.getppid()
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _add_tail(
    result: LoadResult,
    payload: tuple[Parsed, list[MessagesInFile | None] | None],
    name: str,
    line: int,
    shared: dict[str, str],
) -> None:
    """One of the tail's values added as the one-process load adds it; its calls' request
    messages left in the file are put back once the load's sharing has passed them."""
    parsed, left = payload
    loading.add_parsed(result, parsed, name, line, shared)
    if left is not None:
        for call, span in zip(parsed.calls, left, strict=True):
            if span is not None:
                leave_in_file(call, span)


def _load_two_parts(path: Path, split: int, limits: Limits, progress: ProgressFn | None, size: int) -> LoadResult:
    """One plain file, its first ``split`` bytes parsed here while a forked helper parses the rest;
    the same result as :func:`rollout_graph.ingest.loading.load_sources` on it."""
    name = str(path)
    result = LoadResult()
    shared_text: dict[str, str] = {}
    result.files.append(name)
    head = Source(name, lambda: cast(IO[bytes], _HeadReader(name, 0, split)), name)
    counter = [0]

    def tick(records: int) -> None:
        if progress:
            progress(LoadProgress(min(counter[0], size), size, records, result.loaded, 0, 1))

    # The objects alive now go to the collector's permanent generation: its passes would touch
    # (and so copy, page by page) the memory this process shares with the helper since the fork.
    gc.freeze()
    try:
        helper = _Helper(name, name, split, limits)
    except BaseException:
        gc.unfreeze()
        raise
    try:
        with using(limits):
            try:
                loading._load_source(_counted(head, counter), result, shared_text, tick, limits)
            except OSError as exc:
                loading._skip(result, name, 0, f"cannot read file: {exc.strerror or exc}")
                return result  # the sequential reader stops the file here too
            except MemoryError:
                loading._skip(result, name, 0, "out of memory while reading this file; the rest of it is not read")
                return result
            events = helper.events()
            if events is None:  # the helper failed: its part is read here, the same way
                events = _tail_events(name, name, split, _lines_before(name, split), limits)
            for line, kind, payload in events:
                if kind == "p":
                    result.pending.append(Skipped(name, line, payload))
                elif kind == "s":
                    loading._skip(result, name, line, payload)
                else:
                    _add_tail(result, payload, name, line, shared_text)
    finally:
        helper.reap()
        gc.unfreeze()
    if progress:
        progress(LoadProgress(size, size, result.records, result.loaded, 1, 1))
    return result
