"""The message cutter's byte searches by memchr (graph/ingest/message_prefix.py): the tail after a
cut array and the ``\\u0000`` check find exactly what the plain searches find."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest import message_prefix as mp
from rollout_graph.ingest.id_arrays import restore

_BYTES = st.lists(
    st.sampled_from([b"]", b"\\", b"u", b"0", b"u0000", b"\\u0000", b",", b'"t"', b"a", b"]]"]), max_size=40
)
_TAILS = st.sampled_from([b"]", b'],"t"', b"],", b"]]", b'],"temperature":', b"x]", b"", b"]\\u0000"])


@settings(max_examples=500, deadline=None)
@given(_BYTES, _TAILS, st.integers(0, 50), st.integers(1, 12))
def test_the_tail_is_found_where_bytes_find_finds_it(pieces, tail, pos, tries):
    raw = b"".join(pieces)
    old = mp._TRIES
    mp._TRIES = tries  # few tries: the usual search takes over at every count
    try:
        assert mp._find_tail(raw, tail, pos) == raw.find(tail, pos)
    finally:
        mp._TRIES = old


@settings(max_examples=500, deadline=None)
@given(_BYTES, st.integers(0, 60), st.integers(0, 60))
def test_the_nul_check_says_what_bytes_find_says(pieces, start, end):
    raw = b"".join(pieces)
    assert mp._holds_nul(raw, start, end) == (raw.find(b"\\u0000", start, end) >= 0)


def _line(messages: list, after: bytes = b',"temperature":1.0') -> bytes:
    return b'{"request":{"messages":' + orjson.dumps(messages) + after + b'},"id":"x"}'


def test_a_line_whose_messages_hold_brackets_backslashes_and_a_nul_escape_cuts_as_before():
    """Lines whose array end is behind many "]" (past the memchr tries), with backslashes in the
    text, and one holding a \\u0000 escape (left in the line): each value is the whole line's."""
    text = "x" * 3000
    convo = [{"role": "system", "content": text}]
    lines = []
    for i in range(6):
        convo = [*convo, {"role": "user", "content": f"q{i} [a]] \\ \n" + "]" * (i * 3), "parts": [[1], [2]]}]
        lines.append(_line(convo))
    lines.append(_line([*convo, {"role": "user", "content": "nul \x00 here"}]))
    lines.append(_line(convo, after=b',"temperature":1.0,"x":"],\\"temperature\\":"'))
    cutter = mp.MessageCutter()
    for raw in lines:
        short, items = cutter.cut(raw)
        if b"\\u0000" in raw:
            assert items is None and short == raw
            continue
        assert items is not None, raw[:80]
        value = orjson.loads(short)
        cutter.keep()
        restore(value, {mp.MARKER: items})
        assert value == orjson.loads(raw)


def test_messages_read_again_keep_few_files_open_most_recent_last_and_check_changed_files(tmp_path):
    import os
    import zlib

    from rollout_graph.ingest.typed import FileRef

    spans = []
    for i in range(mp._OPEN_FILES + 3):
        path = tmp_path / f"t{i}.jsonl"
        body = orjson.dumps([{"role": "user", "content": f"m{i}"}])
        path.write_bytes(b'{"messages":' + body + b"}\n")
        fd = os.open(path, os.O_RDONLY)
        try:
            ref = FileRef.of(fd, str(path))
        finally:
            os.close(fd)
        spans.append((ref, 12, len(body), zlib.crc32(body), path))
    try:
        for _ in range(2):
            for i, (ref, offset, length, check, _) in enumerate(spans):
                assert mp._read_again(ref, offset, length, check) == [{"role": "user", "content": f"m{i}"}]
                assert mp._read_again(ref, offset, length, check) is not None  # the open file, again
                assert list(mp._open_files)[-1] == ref and len(mp._open_files) <= mp._OPEN_FILES
        first, last = spans[-2], spans[-1]
        mp._read_again(*first[:4])  # not the most recent: moved last
        assert list(mp._open_files)[-1] == first[0]
        # a file that changed: appended to (the bytes still there) reads; rewritten does not
        with open(last[4], "ab") as f:
            f.write(b'{"more": 1}\n')
        assert mp._read_again(*last[:4]) == [{"role": "user", "content": f"m{len(spans) - 1}"}]
        last[4].write_bytes(last[4].read_bytes().replace(b'"m', b'"x'))
        assert mp._read_again(*last[:4]) is None
    finally:
        with mp._open_lock:
            for stream in mp._open_files.values():
                stream.close()
            mp._open_files.clear()
