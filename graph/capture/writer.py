"""The single writer of a capture file: one whole JSONL line per call, flushed as it ends.

Where it sits: the capture proxy's last step, a finished record to the file that ``tail`` and the app
read while it grows (docs/formats.md, "Capture records": the file's name and lines).

Entry points: :meth:`RecordWriter.in_folder` (a new ``capture-<UTC start>.jsonl``, never an existing
file: :func:`new_capture_path`, :func:`open_capture_file`), :meth:`RecordWriter.write` (serialise a
record with :func:`dumps_line` and queue it), :meth:`RecordWriter.close`; :attr:`RecordWriter.written`
counts the lines a reader can parse.

Why one thread: handlers and the event loop never wait on the disk, and a reader never sees a half
line. A failed write is reported (``on_error``) and the file cut back to its last whole line; records
over :data:`BIG_RECORD` go after the smaller ones queued with them (docs/limits.md, "The capture proxy").
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson

_STOP = object()
# After waking for a record, the writer thread waits this long (sleeping, without the GIL) and then
# writes everything queued meanwhile in one go: under many concurrent calls it wakes, and takes the
# GIL from the event loop, a few hundred times a second at most instead of once per call.
GATHER_SECONDS = 0.005
BIG_RECORD = 4 << 20  # bytes: a queued record this big is written after the smaller ones queued with it


def new_capture_path(folder: Path, started: float | None = None) -> Path:
    """A fresh file name in ``folder`` for a run started at ``started`` (never an existing file)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started if started is not None else time.time()))
    candidate = folder / f"capture-{stamp}.jsonl"
    n = 2
    while candidate.exists():
        candidate = folder / f"capture-{stamp}-{n}.jsonl"
        n += 1
    return candidate


def open_capture_file(folder: Path) -> tuple[Path, IO[bytes]]:
    """Create the output folder if needed and open a new capture file exclusively."""
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        path = new_capture_path(folder)
        try:
            return path, open(path, "xb")  # "x": fail rather than overwrite a file made meanwhile
        except FileExistsError:
            continue


def dumps_line(record: dict[str, Any]) -> bytes:
    """One record as a JSONL line (non-string keys and numpy values tolerated)."""
    return orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY) + b"\n"


def _report(message: str) -> None:
    print(f"rollout-graph capture: {message}", file=sys.stderr, flush=True)


class RecordWriter:
    """Queue records from any coroutine or thread; one thread writes them in whole lines."""

    def __init__(
        self, stream: IO[bytes], path: Path | None = None, on_error: Callable[[str], None] | None = None
    ) -> None:
        self.path = path
        self.written = 0
        self.errors: list[str] = []
        self.on_error = on_error if on_error is not None else _report
        self._stream = stream
        self._fd = self._descriptor(stream)
        self._end = self._position()  # the end of the last whole line written
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="capture-writer", daemon=True)
        self._closed = False
        self._thread.start()

    @staticmethod
    def _descriptor(stream: IO[bytes]) -> int | None:
        try:
            stream.flush()
            return stream.fileno()
        except (AttributeError, OSError, ValueError):
            return None  # an in-memory stream (tests): written through its own methods

    def _position(self) -> int:
        try:
            return os.lseek(self._fd, 0, os.SEEK_END) if self._fd is not None else self._stream.tell()
        except (OSError, ValueError):
            return 0

    @classmethod
    def in_folder(cls, folder: Path, on_error: Callable[[str], None] | None = None) -> RecordWriter:
        """A writer on a new capture file in ``folder``."""
        path, stream = open_capture_file(folder)
        return cls(stream, path, on_error)

    def write(self, record: dict[str, Any]) -> None:
        """Queue one finished record (serialised here, so later changes to it do not matter)."""
        if self._closed:
            raise RuntimeError("the capture writer is closed")
        self._queue.put((str(record.get("call_id")), dumps_line(record)))

    def _write_line(self, data: bytes) -> None:
        if self._fd is None:
            self._stream.write(data)
            self._stream.flush()
            return
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def _cut_back(self) -> None:
        """Remove the part of a failed line that reached the file (shrinking needs no space)."""
        try:
            if self._fd is not None:
                os.ftruncate(self._fd, self._end)
                os.lseek(self._fd, self._end, os.SEEK_SET)
            else:
                self._stream.truncate(self._end)
                self._stream.seek(self._end)
        except (OSError, ValueError) as exc:
            self._fail(f"cannot cut {self.path or 'the capture file'} back to its last whole line: {exc}")

    def _fail(self, message: str) -> None:
        self.errors.append(message)
        try:
            self.on_error(message)
        except Exception:  # noqa: BLE001 - a reporting hook must never stop the writer
            pass

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            if batch[0] is not _STOP:
                time.sleep(GATHER_SECONDS)
            while True:  # everything queued now: small records first (a SIGKILL loses the least)
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is _STOP for item in batch)
            # Stable: arrival order is kept among small records and among big ones.
            items = sorted((item for item in batch if item is not _STOP), key=lambda item: len(item[1]) > BIG_RECORD)
            for call_id, data in items:
                try:
                    self._write_line(data)
                    self._end += len(data)
                    self.written += 1
                except OSError as exc:  # disk full, ...: report now, keep the file whole, keep serving
                    self._cut_back()
                    reason = exc.strerror or str(exc)
                    self._fail(f"call {call_id} was not recorded in {self.path or 'the capture file'}: {reason}")
            if stop:
                break

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued and close the file."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout)
        try:
            self._stream.close()
        except OSError as exc:
            self._fail(f"closing {self.path or 'the capture file'}: {exc.strerror or exc}")
