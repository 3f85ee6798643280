"""A stream's bytes, decompressed chunk by chunk with a bound: plain, gzip or zstd by magic bytes.

Entry points: :func:`chunks` (at most ``max_file_bytes`` of decompressed bytes, a
:class:`StreamBreak` at the limit or at damage), :func:`plain_chunks`, :func:`compressed` (the
magic-byte test) and :class:`StreamState` (newlines consumed, whether the bytes are the file's
own). Below ``lines`` (which splits what this yields) and above ``sources``. Never a memory map;
a decompression bomb costs time up to the limit, never memory (docs/limits.md; docs/performance.md,
"Cold inspect: reading lines": why 1 MB blocks into one reused buffer).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import IO

from rollout_graph.ingest.limits import Limits, human

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_SKIPPABLE = b"\x2a\x4d\x18"  # bytes 1-3 of a skippable frame (0x184D2A5?): pzstd writes one first
CHUNK = 1 << 20  # bytes handed to the line splitter at a time (8 MB held two buffers: +16 MB peak)


class StreamBreak(Exception):
    """Reading a file stopped early: corrupt or truncated compression, an I/O error, a limit."""


class StreamState:
    """Newlines consumed so far (where a stream break happened) and whether the stream is plain."""

    newlines = 0
    plain = False


def compressed(head: bytes) -> bool:
    """Whether a stream's first four bytes open gzip or zstd (a skippable zstd frame included)."""
    return (
        head.startswith(GZIP_MAGIC)
        or head.startswith(ZSTD_MAGIC)
        or (len(head) == 4 and head[0] & 0xF0 == 0x50 and head[1:] == ZSTD_SKIPPABLE)
    )


def plain_chunks(stream: IO[bytes], first: bytes) -> Iterator[bytes]:
    """The stream's bytes a chunk at a time, ``first`` (already read) first."""
    if first:
        yield first
    while block := stream.read(CHUNK):
        yield block


def _reused_chunks(stream: IO[bytes], first: bytes) -> Iterator[bytes | bytearray]:
    """The plain stream's bytes read into one reused buffer: each chunk is that buffer, valid
    until the next is asked for (a consumer copies what it keeps). A short read (the end of the
    file) is handed on at once as its own bytes, and what was read before an error is handed on
    before it, as :func:`plain_chunks` does."""
    readinto = getattr(stream, "readinto", None)
    if readinto is None:
        yield from plain_chunks(stream, first)
        return
    size = max(CHUNK, len(first) + 1)  # the first read always asks for bytes
    buffer = bytearray(size)
    view = memoryview(buffer)
    held = len(first)
    view[:held] = first
    while True:
        try:
            n = readinto(view[held:]) or 0
        except OSError:
            if held:
                yield bytes(view[:held])
            raise
        held += n
        if held == size:
            yield buffer
        elif held:
            yield bytes(view[:held])
        if n == 0:
            return
        held = 0


def _gzip_chunks(stream: IO[bytes], first: bytes) -> Iterator[bytes]:
    """Every member of a gzip file (``cat a.gz b.gz`` is valid gzip); output at most CHUNK a call."""
    d = zlib.decompressobj(wbits=31)
    data = first
    while True:
        if not data:
            data = stream.read(1 << 20)
            if not data:
                while out := d.decompress(b"", CHUNK):  # output still held back by the last call
                    yield out
                if not d.eof:
                    raise StreamBreak("the gzip stream ends early (truncated file)")
                return
        if d.eof:
            if not data.strip(b"\x00"):  # zero padding after the last member
                data = b""
                continue
            d = zlib.decompressobj(wbits=31)
        backup = d.copy()
        try:
            out = d.decompress(data, CHUNK)
        except zlib.error as exc:
            # Salvage what decodes before the damage: replay this input in small pieces.
            yield from _gzip_salvage(backup, data)
            raise StreamBreak(f"corrupt gzip data ({exc})") from None
        data = d.unused_data if d.eof else d.unconsumed_tail
        if out:
            yield out


def _gzip_salvage(d, data: bytes) -> Iterator[bytes]:
    """The output of ``data`` up to the first corrupt byte, 256 input bytes at a time (bounded)."""
    for at in range(0, len(data), 256):
        try:
            out = d.decompress(data[at : at + 256])
        except zlib.error:
            return
        if out:
            yield out


def _zstd_chunks(stream: IO[bytes], first: bytes) -> Iterator[bytes]:
    """Every frame of a zstd file. Input is fed in pieces sized so one call's output stays bounded."""
    import zstandard  # third-party, only for a zstd file (docs/performance.md, "Start-up and the print")

    decompressor = zstandard.ZstdDecompressor()
    d = decompressor.decompressobj()
    data = first
    piece = 4 << 10  # small pieces: a corrupt piece loses only its own output
    started = False
    while True:
        if not data:
            data = stream.read(1 << 20)
            if not data:
                if started and not d.eof:
                    raise StreamBreak("the zstd stream ends early (truncated file)")
                return
        if d.eof:
            d = decompressor.decompressobj()
        head, data = data[:piece], data[piece:]
        started = True
        try:
            out = d.decompress(head)
        except zstandard.ZstdError as exc:
            raise StreamBreak(f"corrupt zstd data ({exc})") from None
        if d.eof and d.unused_data:
            data = d.unused_data + data
        # Keep each call's output near 256 KB whatever the compression ratio (a bomb's is huge), so
        # memory stays bounded and a corrupt piece loses little decoded output.
        if out:
            ratio = max(1, len(out) // max(1, len(head)))
            piece = max(1 << 10, min(256 << 10, (256 << 10) // ratio))
            yield out


def chunks(
    stream: IO[bytes], limits: Limits, seen: StreamState | None = None, reuse: bool = False
) -> Iterator[bytes | bytearray]:
    """The stream's bytes (decompressed), at most ``max_file_bytes``; ``seen.plain`` is set when
    they are the file's own bytes (not compressed), so a line's offset is its place in the file.
    With ``reuse`` a plain stream's chunks are one reused buffer (valid until the next chunk).

    Raises:
        StreamBreak: over ``max_file_bytes``, or the compressed stream is damaged.
        OSError: reading failed (the bytes read before it were yielded first).
    """
    head = stream.read(4)
    while len(head) < 4:  # a pipe-like short read
        more = stream.read(4 - len(head))
        if not more:
            break
        head += more
    found: Iterator[bytes] | Iterator[bytes | bytearray]
    if head.startswith(GZIP_MAGIC):
        found = _gzip_chunks(stream, head)
    elif compressed(head):
        found = _zstd_chunks(stream, head)
    else:
        found = _reused_chunks(stream, head) if reuse else plain_chunks(stream, head)
        if seen is not None:
            seen.plain = True
    total = 0
    for chunk in found:
        total += len(chunk)
        if total > limits.max_file_bytes:
            keep = len(chunk) - (total - limits.max_file_bytes)
            if keep > 0:
                yield chunk[:keep]
            raise StreamBreak(
                f"file is larger than {human(limits.max_file_bytes)} decompressed "
                f"(limit max_file_bytes, --max-file-bytes); the rest is not read"
            )
        yield chunk
