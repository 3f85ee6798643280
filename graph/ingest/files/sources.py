"""Where a trace's bytes come from: a file on disk or bytes held in memory (:class:`Source`).

Entry points: :meth:`Source.from_path` / :meth:`Source.from_bytes`, :func:`open_regular` (a
regular file opened without ever blocking on a FIFO, a device or a socket put in its place), and
:class:`FileRef` (a plain file as it was when read: the shortcuts read spans back from it later),
:func:`path_text` (a file name as text any output carries).
The bottom of ingest: the readers above (values/read.py, the loaders in load/) open every source
through here. docs/limits.md: why a FIFO is refused rather than read.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rollout_graph.core.records import short


class NotRegularFile(OSError):
    """A path that is a FIFO, a device or a socket: reading it could block or never end."""


def open_regular(path: Path) -> IO[bytes]:
    """Open a regular file for reading without ever blocking on a FIFO.

    Raises:
        NotRegularFile: the path is a FIFO, a device, a socket or a folder.
        OSError: it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "a folder"
                if stat.S_ISDIR(mode)
                else "not a regular file"
            )
            raise NotRegularFile(0, f"not a regular file ({kind})", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def path_text(path: str) -> str:
    """A path as text every output can carry: bytes of a file name that are not UTF-8 (which
    Python keeps as lone surrogates) shown as ``\\xNN`` escapes, so a name never breaks a JSON,
    Parquet or HTML writer (docs/limits.md)."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        try:
            raw = path.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate no file name decodes to
            return path.encode("utf-8", "backslashreplace").decode("utf-8")
        return raw.decode("utf-8", "backslashreplace")


@dataclass(frozen=True, slots=True, repr=False)
class Source:
    """A named byte stream: a file on disk or an upload held in memory."""

    name: str
    open: Callable[[], IO[bytes]]
    path: str | None = None  # set for a file on disk only (an upload's name is never opened)

    @classmethod
    def from_path(cls, path: str | Path) -> Source:
        """A file on disk; FIFOs, devices and sockets are refused when opened. Its name is
        :func:`path_text` of the path (what reports show); ``path`` is the path itself."""
        p = Path(path)
        return cls(path_text(str(p)), lambda: open_regular(p), str(p))

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> Source:
        """Bytes already in memory (an upload)."""
        return cls(name, lambda: io.BytesIO(data))

    def __repr__(self) -> str:
        return f"Source({short(self.name, 80)})"


@dataclass(frozen=True, slots=True)
class FileRef:
    """A plain file on disk as it was when its lines were read: spans are read back from it."""

    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, fd: int, path: str) -> FileRef | None:
        """The open regular file ``fd`` at ``path`` (None for anything else)."""
        st = os.fstat(fd)
        return cls(path, st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None

    @classmethod
    def of_stream(cls, stream: IO[bytes], path: str | None) -> FileRef | None:
        """The file on disk a plain stream reads (lines can be read back from it), else None."""
        if path is None:
            return None
        try:
            return cls.of(stream.fileno(), path)
        except (OSError, AttributeError, ValueError):  # io.UnsupportedOperation is an OSError
            return None
