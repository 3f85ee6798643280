"""How far a load has got (:class:`LoadProgress`), and a source whose reads are counted for it.

Entry points: :class:`LoadProgress` (bytes read, records and calls parsed, files done: what the
command line's progress line and the app's bar show), ``ProgressFn`` and :func:`counted` (a
source whose stream adds the bytes read from it to a counter). Load layer: ``files.py`` and the
two-part read report through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, cast

from rollout_graph.ingest.files.sources import Source


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


class CountedReads:
    """A source's stream that adds the bytes read from it to a counter (progress in bytes)."""

    def __init__(self, stream: IO[bytes], counter: list[int]) -> None:
        self._stream = stream
        self._counter = counter

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes, counted."""
        data = self._stream.read(size)
        self._counter[0] += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        """Into ``buffer`` (the line reader's reused one: reading._reused_chunks), counted too."""
        n = getattr(self._stream, "readinto")(buffer) or 0  # noqa: B009 - IO[bytes] does not declare it
        self._counter[0] += n
        return n

    def seek(self, offset: int, whence: int = 0) -> int:
        """Where the next read starts (a Parquet file is read where its footer says)."""
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        """Where the next read starts."""
        return self._stream.tell()

    def seekable(self) -> bool:
        """Whether the stream can seek (a file on disk or bytes in memory can)."""
        return self._stream.seekable()

    def readable(self) -> bool:
        """Always: the stream is read."""
        return True

    @property
    def closed(self) -> bool:
        """Whether the stream is closed."""
        return self._stream.closed

    def close(self) -> None:
        """Close the stream."""
        self._stream.close()

    def fileno(self) -> int:
        """The file's descriptor: a plain file's lines can be read back (files/sources.py: FileRef)."""
        return self._stream.fileno()

    def __enter__(self) -> CountedReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def counted(source: Source, counter: list[int]) -> Source:
    """``source``, its stream adding the bytes read from it to ``counter[0]`` (reset when opened)."""

    def opened() -> IO[bytes]:
        counter[0] = 0
        return cast(IO[bytes], CountedReads(source.open(), counter))

    return Source(source.name, opened, source.path)  # the path too: max_sessions projects from it
