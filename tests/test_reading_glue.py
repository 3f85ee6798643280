"""The line reader's glue: chunks read into one reused buffer (reading._reused_chunks) split into
exactly the lines, numbers, offsets and breaks the plain chunks give, whatever the chunk size."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest import parallel, reading
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.reading import Source, read_values

_PIECES = st.sampled_from([b"\n", b" ", b"\t", b"\r\n", b"\r", b"{", b'"a"', b"1", b"}", b"xyz", b"\n\n\n", b"[1,2]"])


def _split_all(data: bytes, reuse: bool, max_line: int, max_file: int, stream=None):
    seen = reading._Counter()
    limits = Limits(max_file_bytes=max_file)
    stream = io.BytesIO(data) if stream is None else stream
    lines = []
    broke = None
    try:
        for line in reading._split(reading._chunks(stream, limits, seen, reuse=reuse), max_line, seen):
            assert line.raw is None or type(line.raw) is bytes
            # (a line over max_line has no offset that counts: it is never parsed nor read back)
            lines.append((line.number, line.raw, line.final, line.offset if line.raw is not None else -1))
    except reading.StreamBreak as exc:
        broke = str(exc)
    return lines, broke, seen.newlines, seen.plain


def _naive(data: bytes, max_line: int) -> list[tuple[int, bytes | None, bool]]:
    """Every non-blank line, numbered, the obvious way."""
    parts = data.split(b"\n")
    out = []
    for i, part in enumerate(parts):
        if part.strip(b" \t\r\n"):
            final = i == len(parts) - 1
            raw = part.lstrip(b" \t\r")
            out.append((i + 1, raw if len(raw) <= max_line else None, final))
    return out


class _ShortReads(io.RawIOBase):
    """A stream that hands out at most ``most`` bytes a call (readinto and read)."""

    def __init__(self, data: bytes, most: int) -> None:
        self._data, self._at, self._most = data, 0, most

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        piece = self._data[self._at : self._at + min(self._most, len(buffer))]
        buffer[: len(piece)] = piece
        self._at += len(piece)
        return len(piece)


class _ReadOnly:
    """A stream with ``read`` only (no readinto): the reused buffer is not used."""

    def __init__(self, data: bytes) -> None:
        self._stream = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._stream.read(size)


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_PIECES, max_size=60),
    chunk=st.integers(1, 40),
    max_line=st.integers(1, 30),
    max_file=st.integers(1, 400),
)
def test_reused_chunks_split_exactly_as_fresh_chunks(pieces, chunk, max_line, max_file):
    data = b"".join(pieces)
    mp = pytest.MonkeyPatch()
    mp.setattr(reading, "_CHUNK", chunk)
    try:
        fresh = _split_all(data, False, max_line, max_file)
        assert _split_all(data, True, max_line, max_file) == fresh
        assert _split_all(data, True, max_line, max_file, _ShortReads(data, max(1, chunk // 3))) == fresh
        assert _split_all(data, True, max_line, max_file, _ReadOnly(data)) == fresh
    finally:
        mp.undo()
    lines, broke, _, _ = fresh
    if broke is None:
        assert [(n, raw, final) for n, raw, final, _ in lines] == _naive(data, max_line)
        for _, raw, _, offset in lines:
            if raw is not None:
                assert data[offset : offset + len(raw)] == raw


def test_a_line_longer_than_the_buffer_and_one_that_ends_at_its_edge(monkeypatch):
    monkeypatch.setattr(reading, "_CHUNK", 8)
    data = b'{"a":1}\n' + b'{"b":"' + b"x" * 30 + b'"}\n  \n{"c":2}'
    lines, broke, newlines, plain = _split_all(data, True, 1000, 1 << 20)
    assert broke is None and plain and newlines == 3
    assert lines == [
        (1, b'{"a":1}', False, 0),
        (2, b'{"b":"' + b"x" * 30 + b'"}', False, 8),
        (4, b'{"c":2}', True, data.rindex(b"{")),
    ]


def test_compressed_chunks_are_not_reused_and_split_the_same():
    import gzip

    data = b'{"a":1}\n\n{"b":2}\n'
    lines, broke, _, plain = _split_all(gzip.compress(data), True, 100, 1 << 20)
    assert broke is None and not plain
    assert [(n, raw) for n, raw, _, _ in lines] == [(1, b'{"a":1}'), (3, b'{"b":2}')]


def test_a_file_read_through_the_progress_counter_counts_every_byte(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "_CHUNK", 64)
    path = tmp_path / "t.jsonl"
    data = b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, b"p" * (i % 90)) for i in range(50)) + b"not json"
    path.write_bytes(data)
    counter = [0]
    counted = parallel._counted(Source.from_path(path), counter)
    got = [(v.line, v.value, v.error) for v in read_values(counted)]
    assert counter[0] == len(data)
    assert got == [(v.line, v.value, v.error) for v in read_values(Source.from_bytes(str(path), data))]
    assert got[-1][0] == 51 and got[-1][2] and got[-1][2].startswith("incomplete last line")
