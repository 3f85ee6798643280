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
