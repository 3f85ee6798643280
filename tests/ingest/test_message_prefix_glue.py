"""The message cutter's byte searches by memchr (graph/ingest/shortcuts/messages.py): the tail after a
cut array and the ``\\u0000`` check find exactly what the plain searches find."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.shortcuts import messages as mp
from rollout_graph.ingest.shortcuts.markers import as_json, restore
from rollout_graph.ingest.values.line import MESSAGES_MARKER

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
        found = cutter.cut(raw)
        if b"\\u0000" in raw:
            assert found is None
            continue
        assert found is not None, raw[:80]
        start, end, items = found
        value = orjson.loads(raw[:start] + as_json(MESSAGES_MARKER) + raw[end:])
        cutter.keep()
        restore(value, {MESSAGES_MARKER: items})
        assert value == orjson.loads(raw)


def test_messages_read_again_keep_few_files_open_most_recent_last_and_check_changed_files(tmp_path):
    import os
    import zlib

    from rollout_graph.ingest.files.sources import FileRef

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


# --- the tail's last place tried first (MessageCutter._rest) ---------------------------------


def _rest_forward(cutter: mp.MessageCutter, raw: bytes, first: int):
    """The search as it was before the last place was tried first: the reference."""
    guess = mp._find_tail(raw, cutter._tail, first) if cutter._tail else -1
    for end in (guess, None):
        if end is None:
            end = mp.array_end(raw, first, mp._MAX_BYTES)
            if end is None or end == guess:
                return None
        elif end < 0:
            continue
        if end - first > mp._MAX_BYTES or mp._holds_nul(raw, first, end):
            return None
        values = mp._values(
            memoryview(raw)[first - 1 : end + 1] if raw[first - 1] == 0x5B else b"[" + raw[first:end] + b"]"
        )
        if values is not None:
            return end, values
    return None


_PIECES = st.lists(
    st.sampled_from(
        [b"]", b"[", b"{", b"}", b",", b'"t"', b'"a]"', b"1", b":", b'"\\u0000"', b"\\", b'"k":', b'],"t":1', b"]]"]
    ),
    max_size=30,
)


@settings(max_examples=1500, deadline=None)
@given(_PIECES, _PIECES, st.sampled_from([b'],"t":1', b"]", b"],", b"]]", b'],"t"', b"]}"]), st.booleans())
def test_the_array_end_from_the_tails_last_place_is_the_forward_searchs(inside, after, tail, opened):
    """Any bytes inside and after the array (nested arrays followed by the tail, the tail again
    after the array, a \\u0000 escape, brackets that do not match): the same end and values as
    the forward search, or None where it gives None."""
    raw = b'{"messages":' + (b"[" if opened else b"[1,") + b"".join(inside) + b"".join(after)
    first = len(b'{"messages":[') + (0 if opened else 2)
    cutter = mp.MessageCutter()
    cutter._tail = tail
    assert cutter._rest(raw, first) == _rest_forward(cutter, raw, first)


# --- no compare of the array's bytes when nothing before it was cut (MessageCutter._left) --------


_IDS = b'"prompt_token_ids":[1,2,3,4,5,6,7,8]'


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from([_IDS, b'"a":"\\u0000"', b'"b":"x"', b'"c":[1,2]']), max_size=3),
    st.lists(st.sampled_from([_IDS, b'"a":"\\u0000"', b'"b":"x"']), max_size=3),
    st.lists(st.sampled_from(["x" * 2100, "y", "[1]", "\x00"]), min_size=1, max_size=3),
    st.booleans(),
)
def test_an_array_left_in_the_file_is_noted_where_the_line_holds_it(before, after, texts, nested_ids):
    """Id arrays cut before the messages, after them or inside them, \\u0000 escapes before them:
    an array found is noted at its own place in the line read (every span is found on that line),
    and one holding another shortcut's cut is not taken."""
    from rollout_graph.core import messages as core_messages
    from rollout_graph.ingest.files.sources import FileRef
    from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter

    messages: list = [{"role": "user", "content": t} for t in texts]
    body = orjson.dumps(messages)
    if nested_ids:
        body = body[:-1] + b',{"role":"user","content":"z",' + _IDS + b"}]"
    head = b",".join([*before, b'"messages":' + body, *after])
    whole = b"{" + head + b"}"
    file = FileRef("t.jsonl", 1, 1)
    cuts = IdArrayCutter().spans(whole)
    with mp.leave_messages_in_file():
        cutter = mp.MessageCutter()
    cutter.off = True
    core_messages._LEFT[0] = None
    found = cutter.cut(whole, cuts, file, 0)
    left = core_messages._LEFT[0]
    core_messages._LEFT[0] = None
    if found is None:
        assert left is None
        return
    start, end, items = found
    assert not any(a < end and start < b for a, b, _ in cuts)  # no other cut inside it
    assert left is not None and left[0] is items
    assert (left[1].offset, left[1].length) == (start, end - start)
    assert orjson.loads(whole[start:end]) == items


# --- the depth shortcut's test of shallow arrays (_shallow) --------------------------------------


def _shallow_loop(items: list) -> bool:
    for item in items:
        if type(item) is dict:
            for value in item.values():
                if type(value) in (dict, list):
                    return False
        elif type(item) is list:
            return False
    return True


_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3))
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_VALUE, max_size=5))
def test_shallow_says_what_the_loop_over_values_says(items):
    assert mp._shallow(items) == _shallow_loop(items)
