"""Two cores: one big plain file read in two parts, this process parsing the head while one
forked helper parses the tail.

Entry points: :func:`two_part_wanted` (where the parent's part ends, or None: read in one
process) and :func:`load_two_parts` (the same result as the one-process loader, line for line).
The helper leaves alternatives and (where this process does) request messages in the file and
sends its calls through ``transfer.py``; it dies with this process (``children.py``) and is
replaced by reading its part here when it fails. Used without being asked only by the console
command, with enough cores free now (``cpu_window.py``). Load layer: ``files.py`` calls it.
docs/performance.md, "Two cores": the rule and its measurements.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
from pathlib import Path
from typing import IO, Any, cast

from rollout_graph.core.records import LoadResult, MessagesInFile, Skipped, leave_in_file, messages_left_in_file
from rollout_graph.ingest.files.chunks import StreamBreak, StreamState, chunks
from rollout_graph.ingest.files.lines import split_lines
from rollout_graph.ingest.files.sources import FileRef, Source
from rollout_graph.ingest.formats.registry import Parsed
from rollout_graph.ingest.limits import Limits, using
from rollout_graph.ingest.load import cpu_window
from rollout_graph.ingest.load.calls import add_parsed, load_source, parse_or_reason, shared_texts, skip_record
from rollout_graph.ingest.load.children import die_with_parent
from rollout_graph.ingest.load.file_probes import (
    PLAIN_SUFFIXES,
    HeadReader,
    line_at,
    lines_before,
    next_line,
    next_nonblank,
    pread,
    standalone,
)
from rollout_graph.ingest.load.progress import LoadProgress, ProgressFn, counted
from rollout_graph.ingest.load.trace_files import rollout_name
from rollout_graph.ingest.load.transfer import extents, receive, send
from rollout_graph.ingest.shortcuts.id_arrays import ARENAS, IdArrayCutter
from rollout_graph.ingest.shortcuts.messages import MessageCutter
from rollout_graph.ingest.values.line import parse_line
from rollout_graph.ingest.values.read import final, too_long

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
    if small or size > limits.max_file_bytes or not path.endswith(PLAIN_SUFFIXES):
        return None
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            if pread(fd, 4, 0).startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd")):
                return None
            first = line_at(fd, next_nonblank(fd, 0, size), size, limits.max_line_bytes)
            if first is None or not first[1] or not standalone(first[1]):
                return None
            second = next_nonblank(fd, first[0], size)
            target = int(size * TWO_PART_HEAD_SHARE["plain"])
            at = next_line(fd, max(target, second + 1), size)
            while at < size:
                line = line_at(fd, at, size, limits.max_line_bytes)
                if line is None:
                    return None
                end, text = line
                if text is None or (text.strip() and standalone(text)):
                    return at if at > second else None
                at = end
    except OSError:
        return None
    return None


def _single_threaded() -> bool:
    """Whether this process runs no other thread (only such a process is forked)."""
    return threading.active_count() == 1


def two_part_wanted(files: list[Path], limits: Limits, forced: bool = False) -> int | None:
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
    if not forced and (size < TWO_PART_MIN_BYTES or cpu_window.workers_available() < 2):
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
    return cpu_window.START is not None and cpu_window.free_cores_now(cpu_window.START) >= TWO_PART_MIN_FREE_CORES


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
    line after a file's first (``values/read.py``), its alternatives and request messages
    left in the file at their offsets in it (the messages when the caller leaves them there:
    ``messages.leave_messages_in_file``, a context the forked helper inherits)."""
    default_session = rollout_name(name)
    events: list[tuple[int, str, Any]] = []
    cutter, messages = IdArrayCutter(), MessageCutter()
    shared: dict[str, str] = {}
    shift = first_line - 1
    seen = StreamState()
    with using(limits), HeadReader(path, start, -1) as stream:
        file = FileRef.of(stream.fileno(), path)
        lines = split_lines(chunks(cast(IO[bytes], stream), limits, seen), limits.max_line_bytes, seen)
        try:
            for line in lines:
                number = line.number + shift
                if line.raw is None:
                    raw = too_long(number, limits)
                else:
                    at = line.offset + start if line.offset >= 0 else -1
                    value = parse_line(number, line.raw, cutter, limits, file, at, messages)
                    raw = final(value, line)
                if raw.pending:
                    events.append((raw.line, "p", raw.error or "incomplete last line"))
                elif raw.error is not None:
                    events.append((raw.line, "s", raw.error))
                else:
                    parsed = parse_or_reason(raw, name, default_session)
                    if isinstance(parsed, str):
                        events.append((raw.line, "s", parsed))
                    else:
                        shared_texts(parsed, shared)  # one copy of each repeated text crosses
                        events.append((raw.line, "v", (parsed, _detached(parsed))))
        except (StreamBreak, OSError) as exc:
            n = seen.newlines + shift
            why = str(exc) if isinstance(exc, StreamBreak) else exc.strerror or str(exc)
            events.append((n + 1, "s", f"stream stopped after line {n}: {why}"))
    return events


class _Helper:
    """One forked process parsing the file's tail; its events are read once, then it is reaped."""

    def __init__(self, path: str, name: str, start: int, limits: Limits) -> None:
        before = set(ARENAS.keys())
        parent = os.getpid()
        read_end, write_end = os.pipe()
        with contextlib.suppress(OSError, AttributeError, ImportError):  # fewer, larger copies through the pipe
            import fcntl

            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        pid = os.fork()
        if pid == 0:  # the helper: never returns
            code = 1
            try:
                os.close(read_end)
                die_with_parent(parent)
                gc.disable()  # a short-lived process: the collector's passes only cost it time
                events = _tail_events(path, name, start, lines_before(path, start), limits)
                arenas = {key: arena for key, arena in list(ARENAS.items()) if key not in before}
                with open(write_end, "wb", closefd=True) as out:
                    send(out, events, arenas, *extents(arenas, events))
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
                events = receive(cast(IO[bytes], stream))
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
    add_parsed(result, parsed, name, line, shared)
    if left is not None:
        for call, span in zip(parsed.calls, left, strict=True):
            if span is not None:
                leave_in_file(call, span)


def load_two_parts(path: Path, split: int, limits: Limits, progress: ProgressFn | None, size: int) -> LoadResult:
    """One plain file, its first ``split`` bytes parsed here while a forked helper parses the rest;
    the same result as :func:`rollout_graph.ingest.load.calls.load_sources` on it."""
    name = str(path)
    result = LoadResult()
    shared_text: dict[str, str] = {}
    result.files.append(name)
    head = Source(name, lambda: cast(IO[bytes], HeadReader(name, 0, split)), name)
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
                load_source(counted(head, counter), result, shared_text, tick, limits)
            except OSError as exc:
                skip_record(result, name, 0, f"cannot read file: {exc.strerror or exc}")
                return result  # the sequential reader stops the file here too
            except MemoryError:
                skip_record(result, name, 0, "out of memory while reading this file; the rest of it is not read")
                return result
            events = helper.events()
            if events is None:  # the helper failed: its part is read here, the same way
                events = _tail_events(name, name, split, lines_before(name, split), limits)
            for line, kind, payload in events:
                if kind == "p":
                    result.pending.append(Skipped(name, line, payload))
                elif kind == "s":
                    skip_record(result, name, line, payload)
                else:
                    _add_tail(result, payload, name, line, shared_text)
    finally:
        helper.reap()
        gc.unfreeze()
    if progress:
        progress(LoadProgress(size, size, result.records, result.loaded, 1, 1))
    return result
