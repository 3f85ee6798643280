"""The single writer of a capture file: one whole JSONL line per call, flushed as it ends.

Request handlers never touch the file: they hand a finished record to :meth:`RecordWriter.write`,
which serialises it and queues the bytes for one writer thread. The thread writes each line whole
and flushes it, so a reader following the file (``tail``, the app) never sees a half line, even
with dozens of concurrent calls, and the event loop never waits on the disk.

File naming (docs/cli.md): one file per proxy run, ``capture-<UTC start>.jsonl`` in the output
folder (``capture-20260101T120000Z.jsonl``; ``-2``, ``-3``, ... when that name exists). An
existing file is never overwritten or appended to. Records carry their ``session_id``, so one
file holds every rollout of the run.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import IO, Any

import orjson

_STOP = object()


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


class RecordWriter:
    """Queue records from any coroutine or thread; one thread writes and flushes them in order."""

    def __init__(self, stream: IO[bytes], path: Path | None = None) -> None:
        self.path = path
        self.written = 0
        self.errors: list[str] = []
        self._stream = stream
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="capture-writer", daemon=True)
        self._closed = False
        self._thread.start()

    @classmethod
    def in_folder(cls, folder: Path) -> RecordWriter:
        """A writer on a new capture file in ``folder``."""
        path, stream = open_capture_file(folder)
        return cls(stream, path)

    def write(self, record: dict[str, Any]) -> None:
        """Queue one finished record (serialised here, so later changes to it do not matter)."""
        if self._closed:
            raise RuntimeError("the capture writer is closed")
        self._queue.put(dumps_line(record))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            try:
                self._stream.write(item)
                self._stream.flush()
                self.written += 1
            except OSError as exc:  # disk full, ...: keep serving, report at the end
                self.errors.append(str(exc))

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued, flush and close the file."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout)
        self._stream.flush()
        self._stream.close()
