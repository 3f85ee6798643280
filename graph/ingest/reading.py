"""Bytes -> JSON values, one per line (JSONL) or one per file (a JSON document).

Files are read in plain buffered chunks (never memory-mapped: a file truncated while it is read,
by log rotation or a capture restarting it, must not kill the process with SIGBUS). gzip and zstd
are detected by magic bytes and decompressed chunk by chunk with a bounded output, so a
decompression bomb costs time up to :attr:`Limits.max_file_bytes` and never memory. Blank runs
are skipped at byte speed. Every unreadable line becomes an error value, never an exception;
a stream that breaks (corrupt or truncated gzip/zstd, an I/O error, a limit) keeps every value
read before the break and ends with one error naming it.

:func:`parse_line` parses one line on its own (a live follower feeds it lines as they arrive).
docs/formats.md describes the rules; docs/limits.md the limits.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from rollout_graph.core.records import short
from rollout_graph.ingest import speedups
from rollout_graph.ingest.id_arrays import IdArrayCutter, restore
from rollout_graph.ingest.limits import LimitExceeded, Limits, human
from rollout_graph.ingest.message_prefix import MARKER, MessageCutter
from rollout_graph.ingest.typed import FileRef, placed

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_SKIPPABLE = b"\x2a\x4d\x18"  # bytes 1-3 of a skippable frame (0x184D2A5?): pzstd writes one first
_CHUNK = 1 << 20  # bytes handed to the line splitter at a time (8 MB held two buffers: +16 MB peak)
_ORJSON_DEPTH = 1024  # orjson refuses deeper documents whatever the limit says


class NotRegularFile(OSError):
    """A path that is a FIFO, a device or a socket: reading it could block or never end."""


def _open_regular(path: Path) -> IO[bytes]:
    """Open a regular file for reading without ever blocking on a FIFO."""
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
        return cls(path_text(str(p)), lambda: _open_regular(p), str(p))

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> Source:
        """Bytes already in memory (an upload)."""
        return cls(name, lambda: io.BytesIO(data))

    def __repr__(self) -> str:
        return f"Source({short(self.name, 80)})"


@dataclass(frozen=True, slots=True)
class RawValue:
    """One parsed JSON value, or the reason it could not be parsed.

    ``pending`` marks the last line of a file that has no newline yet and does not parse: a file
    still being written, reported apart from bad records.
    """

    line: int
    value: Any = None
    error: str | None = None
    pending: bool = False


class StreamBreak(Exception):
    """Reading a file stopped early: corrupt or truncated compression, an I/O error, a limit."""


# --- decompression, chunk by chunk with bounded output ---------------------------------------


def _plain_chunks(stream: IO[bytes], first: bytes) -> Iterator[bytes]:
    if first:
        yield first
    while block := stream.read(_CHUNK):
        yield block


def _reused_chunks(stream: IO[bytes], first: bytes) -> Iterator[bytes | bytearray]:
    """The plain stream's bytes read into one reused buffer: each chunk is that buffer, valid
    until the next is asked for (a consumer copies what it keeps). A fresh 1 MB bytes a read made
    the heap grow and shrink: 35,000 page faults on a 479 MB file, about half the read's system
    time. A short read (the end of the file) is handed on at once as its own bytes, and what was
    read before an error is handed on before it, as :func:`_plain_chunks` does."""
    readinto = getattr(stream, "readinto", None)
    if readinto is None:
        yield from _plain_chunks(stream, first)
        return
    size = max(_CHUNK, len(first) + 1)  # the first read always asks for bytes
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
    """Every member of a gzip file (``cat a.gz b.gz`` is valid gzip); output at most _CHUNK a call."""
    d = zlib.decompressobj(wbits=31)
    data = first
    while True:
        if not data:
            data = stream.read(1 << 20)
            if not data:
                while out := d.decompress(b"", _CHUNK):  # output still held back by the last call
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
            out = d.decompress(data, _CHUNK)
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
    import zstandard

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


def _chunks(
    stream: IO[bytes], limits: Limits, seen: _Counter | None = None, reuse: bool = False
) -> Iterator[bytes | bytearray]:
    """The stream's bytes (decompressed), at most ``max_file_bytes``; ``seen.plain`` is set when
    they are the file's own bytes (not compressed), so a line's offset is its place in the file.
    With ``reuse`` a plain stream's chunks are one reused buffer (:func:`_reused_chunks`)."""
    head = stream.read(4)
    while len(head) < 4:  # a pipe-like short read
        more = stream.read(4 - len(head))
        if not more:
            break
        head += more
    chunks: Iterator[bytes] | Iterator[bytes | bytearray]
    if head.startswith(_GZIP_MAGIC):
        chunks = _gzip_chunks(stream, head)
    elif head.startswith(_ZSTD_MAGIC) or (len(head) == 4 and head[0] & 0xF0 == 0x50 and head[1:] == _ZSTD_SKIPPABLE):
        chunks = _zstd_chunks(stream, head)
    else:
        chunks = _reused_chunks(stream, head) if reuse else _plain_chunks(stream, head)
        if seen is not None:
            seen.plain = True
    total = 0
    for chunk in chunks:
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


# --- lines ------------------------------------------------------------------------------------

_NON_BLANK = re.compile(rb"[^ \t\r\n]")


@dataclass(slots=True)
class _Line:
    number: int
    raw: bytes | None  # None when the line is over max_line_bytes
    final: bool = False  # the file's last line, with no newline after it
    offset: int = -1  # of the line's first byte in the (decompressed) stream


class _Counter:
    """Newlines consumed so far: where a stream break happened; whether the stream is plain."""

    newlines = 0
    plain = False


def _split(chunks: Iterator[bytes] | Iterator[bytes | bytearray], max_line: int, seen: _Counter) -> Iterator[_Line]:
    """Non-blank lines with 1-based numbers; blank runs cost a memchr, not a Python loop.

    A chunk may be a reused buffer (:func:`_reused_chunks`): every byte kept past it is copied
    out, each line once, into its own ``bytes``."""
    line_no = 0  # newlines consumed so far
    carry: list[bytes | memoryview] = []
    carry_len = 0
    carry_at = 0  # stream offset of the carried line's first byte
    too_long = False
    base = 0  # stream offset of the chunk's first byte
    for chunk in chunks:
        at, base = base, base + len(chunk)
        view = memoryview(chunk)
        pos = 0
        if carry or too_long:
            end = chunk.find(b"\n")
            if end < 0:
                if not too_long:
                    carry.append(bytes(chunk))
                    carry_len += len(chunk)
                    if carry_len > max_line:
                        carry, carry_len, too_long = [], 0, True
                continue
            seen.newlines = line_no
            if too_long or carry_len + end > max_line:
                yield _Line(line_no + 1, None)
            else:
                carry.append(view[:end])
                yield _Line(line_no + 1, b"".join(carry), offset=carry_at)
            carry, carry_len, too_long = [], 0, False
            line_no += 1
            pos = end + 1
        elif chunk.isspace():
            line_no += chunk.count(b"\n")
            seen.newlines = line_no
            continue
        while True:
            m = _NON_BLANK.search(chunk, pos)
            if m is None:
                line_no += chunk.count(b"\n", pos)
                seen.newlines = line_no
                break
            start = m.start()
            if start > pos:
                line_no += chunk.count(b"\n", pos, start)
            end = chunk.find(b"\n", start)
            seen.newlines = line_no
            if end < 0:
                carry_len = len(chunk) - start
                carry_at = at + start
                if carry_len > max_line:
                    carry, carry_len, too_long = [], 0, True
                else:
                    carry = [bytes(view[start:])]
                break
            yield _Line(line_no + 1, bytes(view[start:end]) if end - start <= max_line else None, offset=at + start)
            line_no += 1
            pos = end + 1
    seen.newlines = line_no
    if too_long:
        yield _Line(line_no + 1, None, final=True)
    elif carry:
        yield _Line(line_no + 1, b"".join(carry), final=True, offset=carry_at)


# --- parsing ----------------------------------------------------------------------------------


def _depth(raw: bytes) -> int:
    """Deepest bracket nesting outside strings: linear time, bounded memory, no regex."""
    return _scan(raw, ())[0]


def _scan(raw: bytes, probes: tuple[int, ...] | list[int]) -> tuple[int, list[tuple[int, bool]]]:
    """The deepest nesting outside strings, and for each probe position (ascending) the nesting
    depth there and whether a real quote opening a string stands there.

    Only lines the stdlib must parse (or rare checks) come here. The line is scanned in blocks
    with numpy; the state carried from one block to the next is three numbers (the depth, whether
    a string is open, how many backslashes end the block), so temporaries stay a small multiple of
    the block size whatever the line's length. A quote opens or closes a string unless an odd run
    of backslashes precedes it.
    """
    depth = deepest = 0
    in_string = 0  # 1 while a string is open at the block boundary
    trailing = 0  # backslashes that end the previous block
    block = 1 << 20
    at_probe: list[tuple[int, bool]] = []
    wanted = np.asarray(probes, dtype=np.int64)
    next_probe = 0
    for at in range(0, len(raw), block):
        arr = np.frombuffer(raw, dtype=np.uint8, count=min(block, len(raw) - at), offset=at)
        n = arr.shape[0]
        backslash = arr == 0x5C
        positions = np.arange(n, dtype=np.int64)
        # Index of the last non-backslash byte at or before each position (-1 - trailing before it).
        last_plain = np.where(backslash, np.int64(-1 - trailing), positions)
        np.maximum.accumulate(last_plain, out=last_plain)
        run_before = np.empty(n, dtype=np.int64)  # backslashes right before each byte
        run_before[0] = trailing
        run_before[1:] = positions[:-1] - last_plain[:-1]
        quote = (arr == 0x22) & (run_before % 2 == 0)
        opened = (np.cumsum(quote, dtype=np.int64) + in_string) % 2  # odd: inside a string
        outside = opened == 0
        opens = ((arr == 0x5B) | (arr == 0x7B)) & outside
        closes = ((arr == 0x5D) | (arr == 0x7D)) & outside
        running = np.cumsum(opens.astype(np.int64) - closes, dtype=np.int64) + depth
        deepest = max(deepest, int(running.max()))
        upto = int(np.searchsorted(wanted, at + n, side="left"))
        if upto > next_probe:
            k = wanted[next_probe:upto] - at
            at_probe += zip(running[k].tolist(), (quote[k] & (opened[k] == 1)).tolist(), strict=True)
            next_probe = upto
        depth = int(running[-1])
        in_string = int(opened[-1])
        trailing = int(n - 1 - last_plain[-1]) if backslash[-1] else 0
    return deepest, at_probe


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")  # a surrogate written as raw UTF-8 (CESU-8)


def _clean_surrogates(value: Any) -> Any:
    """Lone UTF-16 surrogates (valid JSON escapes, invalid text) become U+FFFD."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_clean_surrogates(k): _clean_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_surrogates(v) for v in value]
    return value


def parse_json(raw: bytes, max_depth: int | None = None) -> Any:
    """orjson first (fast); the stdlib as a fallback for NaN/Infinity, big numbers and surrogates.

    Raises:
        ValueError: not JSON, or nested deeper than ``max_depth`` (LimitExceeded).
    """
    depth = _ORJSON_DEPTH if max_depth is None else min(max_depth, _ORJSON_DEPTH)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc) or "recursion" in str(exc).lower():
            raise LimitExceeded(f"JSON nested deeper than {_ORJSON_DEPTH} levels") from None
        if _depth(raw) > depth:
            raise LimitExceeded(f"JSON nested deeper than {depth} levels (limit max_depth, --max-depth)") from None
        try:
            value = json.loads(raw)
        except RecursionError:
            raise LimitExceeded(f"JSON nested too deep (limit max_depth {depth})") from None
        # The stdlib decodes bytes with surrogatepass: raw surrogate bytes (ED A0 80 ...) and
        # \\ud800 escapes both become lone surrogates, which no encoder downstream accepts.
        dirty = _SURROGATE_ESCAPE.search(raw) or _SURROGATE_BYTES.search(raw)
        return _clean_surrogates(value) if dirty else value


_IDENTITY_KEYS = (b'"session_id"', b'"call_id"', b'"node_id"')  # top-level keys that place a record
_KEY_AFTER = re.compile(rb"[ \t\r\n]*:")
# Every quote that starts an identity key, overlapping ones included (the match takes the quote
# only): the line's identity-key occurrences, in order, in one scan by the regex engine.
_IDENTITY_KEY_AT = re.compile(rb'"(?=(session_id|call_id|node_id)")')


def _duplicate_identity_key(raw: bytes) -> str | None:
    """A top-level key placing the record (session or call id) that the object holds twice.

    JSON parsers keep the last silently, which would move the record to another session. The
    bytes are searched first; only a line where such a key occurs twice is scanned for where
    each occurrence is (inside a string, nested, or a key of the top-level object).
    """
    # One scan lists every occurrence of every identity key (at each quote, so none is hidden by
    # an overlapping one): when no key is listed twice, none occurs twice and the verdict is None.
    # (In C where built: a memchr for each "_id\"" and a look at the bytes before it.)
    native = speedups.native
    if native is not None and type(raw) is bytes:
        if not native.identity_repeats(raw):
            return None
    else:
        found = _IDENTITY_KEY_AT.findall(raw)
        if len(found) < 2 or len(set(found)) == len(found):
            return None
    for key in _IDENTITY_KEYS:
        if raw.count(key) < 2:
            continue
        spots = []
        at = raw.find(key)
        while at >= 0:
            if _KEY_AFTER.match(raw, at + len(key)):
                spots.append(at)
            at = raw.find(key, at + 1)
        if len(spots) < 2:
            continue
        top = sum(1 for depth, opens in _scan(raw, spots)[1] if depth == 1 and opens)
        if top > 1:
            return key.decode().strip('"')
    return None


def _parsed_cut(
    cut: bytes, arrays: dict[str, Any], limits: Limits, messages: MessageCutter | None = None
) -> tuple[Any, bytes]:
    """The value of a cut line, and the bytes it was parsed from (the line with its ``messages``
    array cut too when that shortcut holds: graph/ingest/message_prefix.py)."""
    if messages is not None:
        short, items = messages.cut(cut)
        if items is not None:
            try:
                value = orjson.loads(short)
            except orjson.JSONDecodeError:
                del items, short  # the whole line, the validating way (its error is that path's)
            else:
                messages.keep()
                restore(value, {**arrays, MARKER: items})
                return value, short
    value = parse_json(cut, limits.max_depth)
    if arrays:
        restore(value, arrays)
    return value, cut


def parse_line(
    line: int,
    raw: bytes,
    cutter: IdArrayCutter,
    limits: Limits | None = None,
    file: FileRef | None = None,
    offset: int = -1,
    messages: MessageCutter | None = None,
) -> RawValue:
    """One JSONL line -> a value, or an error value naming why it is not one. Never raises.

    A line whose object holds ``session_id``, ``call_id`` or ``node_id`` twice is skipped (which
    one counts is ambiguous, and a parser keeping the last would silently move the record).
    With ``file`` (the plain file on disk the line is read from) and ``offset`` (where the line
    starts in it), chat logprob alternatives are left in the file until read
    (graph/ingest/typed.py). With ``messages`` (one per file read in order) a ``messages``
    array whose start was seen in a recent line reuses those values
    (graph/ingest/message_prefix.py).
    """
    limits = limits or Limits()
    try:
        at = offset if offset >= 0 else None
        known = None if messages is None else messages.known
        cut, arrays = cutter.cut(raw, limits.max_ids, file, at, known=known)
        if messages is not None:
            messages.at(file, raw, at)  # an array left in the file is found at its place in ``raw``
        value, parsed = _parsed_cut(cut, arrays, limits, messages)
        if not placed(value, arrays):  # a byte-located logprob cut the record does not confirm
            cut, arrays = cutter.cut(raw, limits.max_ids, file, at, locate=False, known=known)
            value, parsed = _parsed_cut(cut, arrays, limits, messages)
        # The cut messages array is a nested value: the top-level keys are those of ``cut``.
        duplicate = _duplicate_identity_key(parsed) if isinstance(value, dict) else None
        if duplicate is not None:
            return RawValue(line, error=f"duplicate key {duplicate!r} in one object: which value counts is ambiguous")
    except LimitExceeded as exc:
        return RawValue(line, error=f"over a limit: {_short(exc)}")
    except (ValueError, UnicodeDecodeError, OverflowError) as exc:
        return RawValue(line, error=f"not JSON: {_short(exc)}")
    except (RecursionError, MemoryError) as exc:
        return RawValue(line, error=f"cannot parse: {type(exc).__name__}")
    return RawValue(line, value)


_parsed = parse_line  # the name other modules used before


def _short(exc: BaseException, limit: int = 160) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _too_long(line: int, limits: Limits) -> RawValue:
    return RawValue(
        line,
        error=f"over a limit: line longer than {human(limits.max_line_bytes)} (limit max_line_bytes, --max-line-bytes)",
    )


def _items(value: Any) -> Iterator[RawValue]:
    """A file that is one JSON array holds records: "line" is the item's 1-based position."""
    for i, item in enumerate(value, start=1):
        yield RawValue(i, item)


def read_values(source: Source, limits: Limits | None = None) -> Generator[RawValue, None, None]:
    """Yield the JSON values in a source, in order, with 1-based line numbers.

    JSONL is read line by line. A file whose first non-blank line does not parse, opens an object
    or array, and whose next line is not a JSON object or array on its own, is tried as one
    pretty-printed document; if that fails too, it is read line by line after all, so a broken
    first line loses only itself. A file that is one JSON array (pretty-printed or on one line)
    yields its items.

    Raises:
        OSError: the source cannot be opened (missing, unreadable, not a regular file).
    """
    limits = limits or Limits()
    from rollout_graph.ingest.formats import binary_files  # Parquet rows; pickles refused (docs/formats.md)

    if binary_files.is_binary(source.name):
        yield from binary_files.values(source, limits)
        return
    cutter = IdArrayCutter()
    messages = MessageCutter()
    with source.open() as stream:
        seen = _Counter()
        lines = _split(_chunks(stream, limits, seen, reuse=True), limits.max_line_bytes, seen)
        try:
            first = next(lines, None)
            if first is None:
                return
            file = _file_ref(source, stream) if seen.plain else None
            if first.raw is None:
                yield _too_long(first.number, limits)
            else:
                value = parse_line(first.number, first.raw, cutter, limits, file, first.offset, messages)
                if value.error and first.raw[:1] in (b"{", b"["):
                    second = next(lines, None)
                    if second is not None and not _standalone(second, cutter, limits):
                        yield from _document_or_lines(first, second, lines, cutter, limits)
                        return
                    yield _final(value, first)
                    if second is not None:
                        yield from _line_values(second, cutter, limits, file, messages)
                elif isinstance(value.value, list):  # json.dump(list) writes one line
                    second = next(lines, None)
                    if second is None:
                        yield from _items(value.value)
                        return
                    yield value
                    yield from _line_values(second, cutter, limits, file, messages)
                else:
                    yield _final(value, first)
            for line in lines:  # _line_values inline: no generator a line
                if line.raw is None:
                    yield _too_long(line.number, limits)
                else:
                    yield _final(parse_line(line.number, line.raw, cutter, limits, file, line.offset, messages), line)
        except StreamBreak as exc:
            yield RawValue(seen.newlines + 1, error=f"stream stopped after line {seen.newlines}: {exc}")
        except OSError as exc:
            reason = exc.strerror or str(exc)
            yield RawValue(seen.newlines + 1, error=f"stream stopped after line {seen.newlines}: {reason}")


def _file_ref(source: Source, stream: IO[bytes]) -> FileRef | None:
    """The file on disk a plain source reads (lines can be read back from it), else None."""
    if source.path is None:
        return None
    try:
        return FileRef.of(stream.fileno(), source.path)
    except (OSError, AttributeError, ValueError):  # io.UnsupportedOperation is an OSError
        return None


def _final(value: RawValue, line: _Line) -> RawValue:
    if value.error and line.final:
        return RawValue(value.line, error=f"incomplete last line (no newline yet): {value.error}", pending=True)
    return value


def _line_values(
    line: _Line,
    cutter: IdArrayCutter,
    limits: Limits,
    file: FileRef | None = None,
    messages: MessageCutter | None = None,
) -> Iterator[RawValue]:
    if line.raw is None:
        yield _too_long(line.number, limits)
    else:
        yield _final(parse_line(line.number, line.raw, cutter, limits, file, line.offset, messages), line)


def _standalone(line: _Line, cutter: IdArrayCutter, limits: Limits) -> bool:
    """Whether a line is a JSON object or array on its own (so the file is JSONL)."""
    if line.raw is None:
        return True
    if line.raw[:1] not in (b"{", b"["):
        return False
    value = parse_line(line.number, line.raw, IdArrayCutter(), limits)
    return value.error is None and isinstance(value.value, (dict, list))


def _document_or_lines(
    first: _Line, second: _Line, rest: Iterator[_Line], cutter: IdArrayCutter, limits: Limits
) -> Iterator[RawValue]:
    """A pretty-printed document; if it does not parse, every line on its own after all."""
    lines = [first, second]
    size = len(first.raw or b"") + len(second.raw or b"")
    for line in rest:
        lines.append(line)
        size += len(line.raw or b"") + 1
        if size > limits.max_line_bytes:
            break
    whole = None
    if size <= limits.max_line_bytes and all(line.raw is not None for line in lines):
        data = b"\n".join(line.raw or b"" for line in lines)
        whole = parse_line(first.number, data, cutter, limits)
    if whole is not None and whole.error is None:
        if isinstance(whole.value, list):
            yield from _items(whole.value)
        else:
            yield whole
        return
    for line in lines:
        yield from _line_values(line, cutter, limits)
    for line in rest:
        yield from _line_values(line, cutter, limits)


# --- Parquet, bounded from its footer ---------------------------------------------------------


def read_parquet_bounded(name: str, data: bytes, limits: Limits | None = None):
    """A Parquet file held in memory -> a ``pyarrow.Table``, refusing it early if it is too big.

    Before any page is decoded, the footer's row count and each column chunk's declared size are
    checked: the rows against :attr:`Limits.max_parquet_rows`, and the decoded size (for each
    column chunk the larger of its uncompressed bytes and 8 bytes per value, so a run-length
    encoded bomb of zeros counts what it decodes to) against :attr:`Limits.max_parquet_bytes`.
    The table is then read one batch at a time with the same two counts kept on what really
    decodes, so a footer that lies stops at the limit too. Never ``read_table()`` unbounded.

    Raises:
        LimitExceeded: over a limit (the message names the file, the limit and its flag).
        ValueError: not a readable Parquet file (the message says why).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    limits = limits or Limits()
    try:
        file = pq.ParquetFile(io.BytesIO(data))
        meta = file.metadata
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a corrupt footer
        raise ValueError(f"{name}: not a readable Parquet file: {_short(exc)}") from None
    rows = meta.num_rows
    if rows > limits.max_parquet_rows:
        raise LimitExceeded(
            f"{name}: {rows:,} rows (limit max_parquet_rows {limits.max_parquet_rows:,}, "
            "ROLLOUT_GRAPH_MAX_PARQUET_ROWS); the file is not read"
        )
    declared = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            declared += max(column.total_uncompressed_size, 8 * column.num_values)
    if declared > limits.max_parquet_bytes:
        raise LimitExceeded(
            f"{name}: decodes to about {human(declared)} (limit max_parquet_bytes "
            f"{human(limits.max_parquet_bytes)}, ROLLOUT_GRAPH_MAX_PARQUET_BYTES); the file is not read"
        )
    batches = []
    seen_rows = seen_bytes = 0
    try:
        for batch in file.iter_batches(batch_size=65536):
            seen_rows += batch.num_rows
            seen_bytes += batch.nbytes
            if seen_rows > limits.max_parquet_rows or seen_bytes > limits.max_parquet_bytes:
                raise LimitExceeded(
                    f"{name}: holds more than its footer says (limits max_parquet_rows "
                    f"{limits.max_parquet_rows:,}, max_parquet_bytes {human(limits.max_parquet_bytes)}); "
                    "the file is not read"
                )
            batches.append(batch)
    except LimitExceeded:
        raise
    except MemoryError:
        raise LimitExceeded(f"{name}: out of memory while decoding; the file is not read") from None
    except Exception as exc:  # noqa: BLE001 - ArrowMemoryError, ArrowInvalid, OSError for corrupt pages
        if "memory" in type(exc).__name__.lower() or "alloc" in str(exc).lower():
            raise LimitExceeded(f"{name}: out of memory while decoding ({_short(exc)}); the file is not read") from None
        raise ValueError(f"{name}: not a readable Parquet file: {_short(exc)}") from None
    return pa.Table.from_batches(batches, schema=file.schema_arrow)
