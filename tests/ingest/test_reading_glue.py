"""The line reader's glue: chunks read into one reused buffer (files/chunks.py) split into
exactly the lines, numbers, offsets and breaks the plain chunks give, whatever the chunk size."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files import chunks
from rollout_graph.ingest.files.json_values import nesting
from rollout_graph.ingest.files.lines import split_lines
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.load.progress import counted
from rollout_graph.ingest.values import line as line_module
from rollout_graph.ingest.values.read import read_values

_PIECES = st.sampled_from([b"\n", b" ", b"\t", b"\r\n", b"\r", b"{", b'"a"', b"1", b"}", b"xyz", b"\n\n\n", b"[1,2]"])


def _split_all(data: bytes, reuse: bool, max_line: int, max_file: int, stream=None):
    seen = chunks.StreamState()
    limits = Limits(max_file_bytes=max_file)
    stream = io.BytesIO(data) if stream is None else stream
    lines = []
    broke = None
    try:
        for line in split_lines(chunks.chunks(stream, limits, seen, reuse=reuse), max_line, seen):
            assert line.raw is None or type(line.raw) is bytes
            # (a line over max_line has no offset that counts: it is never parsed nor read back)
            lines.append((line.number, line.raw, line.final, line.offset if line.raw is not None else -1))
    except chunks.StreamBreak as exc:
        broke = str(exc)
    except OSError as exc:
        broke = f"OSError {exc}"
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


class _Failing(_ShortReads):
    """Short reads, then an I/O error once ``fail_at`` bytes were handed out."""

    def __init__(self, data: bytes, most: int, fail_at: int, into: bool) -> None:
        super().__init__(data, most)
        self._fail_at, self._into = fail_at, into

    def readinto(self, buffer) -> int:
        if self._at >= self._fail_at:
            raise OSError(5, "Input/output error")
        return super().readinto(memoryview(buffer)[: max(1, min(len(buffer), self._fail_at - self._at))])

    def read(self, size: int = -1) -> bytes:
        if self._at >= self._fail_at:
            raise OSError(5, "Input/output error")
        piece = self._data[self._at : self._at + min(self._most, size, max(1, self._fail_at - self._at))]
        self._at += len(piece)
        return piece

    def __getattribute__(self, name: str):
        if name == "readinto" and not object.__getattribute__(self, "_into"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)


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
    mp.setattr(chunks, "CHUNK", chunk)
    try:
        fresh = _split_all(data, False, max_line, max_file)
        assert _split_all(data, True, max_line, max_file) == fresh
        assert _split_all(data, True, max_line, max_file, _ShortReads(data, max(1, chunk // 3))) == fresh
        assert _split_all(data, True, max_line, max_file, _ReadOnly(data)) == fresh
        for fail_at in (0, 3, len(data) // 2, len(data) - 1):
            most = max(1, chunk // 2)
            failing = _split_all(data, True, max_line, max_file, _Failing(data, most, fail_at, into=True))
            assert failing == _split_all(data, False, max_line, max_file, _Failing(data, most, fail_at, into=False))
    finally:
        mp.undo()
    lines, broke, _, _ = fresh
    if broke is None:
        assert [(n, raw, final) for n, raw, final, _ in lines] == _naive(data, max_line)
        for _, raw, _, offset in lines:
            if raw is not None:
                assert data[offset : offset + len(raw)] == raw


def test_a_line_longer_than_the_buffer_and_one_that_ends_at_its_edge(monkeypatch):
    monkeypatch.setattr(chunks, "CHUNK", 8)
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
    monkeypatch.setattr(chunks, "CHUNK", 64)
    path = tmp_path / "t.jsonl"
    data = b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, b"p" * (i % 90)) for i in range(50)) + b"not json"
    path.write_bytes(data)
    counter = [0]
    source = counted(Source.from_path(path), counter)
    got = [(v.line, v.value, v.error) for v in read_values(source)]
    assert counter[0] == len(data)
    assert got == [(v.line, v.value, v.error) for v in read_values(Source.from_bytes(str(path), data))]
    assert got[-1][0] == 51 and got[-1][2] and got[-1][2].startswith("incomplete last line")


# --- the duplicate identity-key check: one scan of every key occurrence -------------------------


def _previous_duplicate_identity_key(raw: bytes) -> str | None:
    """The check before this one: the keys met near either end, against every `_id"` counted."""
    import re

    keys = line_module._IDENTITY_KEYS
    any_key = re.compile(b"|".join(re.escape(key) for key in keys))
    met = len(set(any_key.findall(raw, 0, 1024)).union(any_key.findall(raw, max(0, len(raw) - 1024))))
    if len(re.findall(rb'_id"', raw)) <= met:
        return None
    for key in keys:
        if raw.count(key) < 2:
            continue
        spots = []
        at = raw.find(key)
        while at >= 0:
            if line_module._KEY_AFTER.match(raw, at + len(key)):
                spots.append(at)
            at = raw.find(key, at + 1)
        if len(spots) < 2:
            continue
        top = sum(1 for depth, opens in nesting(raw, spots)[1] if depth == 1 and opens)
        if top > 1:
            return key.decode().strip('"')
    return None


_KEY_PIECES = st.sampled_from(
    [
        b'"session_id":"a",',
        b'"session_id" :\t"b",',
        b'"call_id":"c",',
        b'"call_id":"d",',
        b'"node_id":1,',
        b'"tool_call_id":"t",',
        b'"x":{"session_id":"n","call_id":"m"},',
        b'"y":"\\"call_id\\":",',
        b'"z":"session_id\\"",',
        b'"q":"\\\\",',
        b'"node_id"call_id":',  # overlapping occurrences (not JSON: the check is exact on any bytes)
        b'"session_id""call_id":',
        b'"w":["call_id",{"node_id":2}],',
        b'"pad":"' + b"p" * 1100 + b'",',
        b'_id"',
        b'\\"',
    ]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_KEY_PIECES, max_size=16), st.booleans())
def test_the_duplicate_key_check_gives_the_previous_verdict(pieces, keys_last):
    import orjson

    body = b"".join(pieces)
    raw = b'{"end":0,' + body[:-1] + b"}" if keys_last and body.endswith(b",") else b"{" + body + b'"end":0}'
    assert line_module._duplicate_identity_key(raw) == _previous_duplicate_identity_key(raw)
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return
    # A JSON line: the verdict is what the top-level pairs say (no key here is spelled with escapes)
    import json

    pairs: list = []
    json.loads(raw, object_pairs_hook=lambda p: pairs.append(p) or dict(p))
    top = [key for key, _ in pairs[-1]]  # the outermost object is built last
    twice = [key for key in ("session_id", "call_id", "node_id") if top.count(key) > 1]
    assert line_module._duplicate_identity_key(raw) == (twice[0] if twice else None)


@given(st.binary(max_size=80), st.binary(max_size=80))
def test_the_duplicate_key_check_on_any_bytes(a, b):
    for raw in (a, b'{"call_id":1,' + a + b'"call_id":2}', a + b'"node_id"node_id":' + b):
        assert line_module._duplicate_identity_key(raw) == _previous_duplicate_identity_key(raw)


def test_a_duplicate_far_from_both_ends_and_overlapping_keys():
    pad = b'"pad":"' + b"p" * 5000 + b'",'
    raw = b'{"session_id":"a",' + pad + b'"session_id":"b",' + pad + b'"call_id":"c"}'
    assert line_module._duplicate_identity_key(raw) == "session_id"
    assert line_module._duplicate_identity_key(raw.replace(b'"session_id":"b",', b'"x":"b",')) is None
    assert line_module._duplicate_identity_key(b'{"call_id":"a","x":{"call_id":"b"}}') is None  # nested
    assert line_module._duplicate_identity_key(b'{"call_id":"a","x":"\\"call_id\\":1"}') is None  # in a string
    assert line_module._duplicate_identity_key(b'{"call_id":"a","call_id" : "b"}') == "call_id"
