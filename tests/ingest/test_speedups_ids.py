"""The C id-array parser (``_speedups.plain_ids``, graph/ingest/csrc/id_text.c) against the Python
path it stands for (``id_arrays._parse_plain_python``) and against ``orjson.loads`` of the body
as an array: the same ids, dtype and largest, or None from both, on plain texts, odd whitespace,
leading zeros, empty elements, signs, decimals, exponents, numbers around the limits, random
bytes and mutations of valid texts."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest import speedups
from rollout_graph.ingest.shortcuts import id_arrays
from rollout_graph.ingest.shortcuts.id_arrays import _parse_plain, _parse_plain_python

pytestmark = pytest.mark.skipif(speedups.native is None, reason="the C speedups are not built")

SPACE = [b"", b" ", b"\t", b"\r", b"\n", b"  ", b"\r\n", b" \t\n "]
# numbers near the limits: int32, the 2**62 the fast path refuses from, int64, uint64
EDGES = [2**k + d for k in (31, 32, 62, 63, 64) for d in (-2, -1, 0, 1)] + [0, 1, 9, 10, 10**18, 10**19, 10**20]


def _native(text: bytes):
    assert speedups.native is not None
    got = speedups.native.plain_ids(text)
    if got is None:
        return None
    ids, top = got
    assert type(ids) is bytearray and type(top) is int
    return np.frombuffer(ids, dtype=np.int64), top


def _same(text: bytes) -> None:
    want = _parse_plain_python(text)
    got = _native(text)
    wired = _parse_plain(text)
    if want is None:
        assert got is None and wired is None, text
        return
    assert got is not None and wired is not None, text
    for arr, top in (got, wired):
        assert arr.dtype == want[0].dtype == np.int64
        assert arr.tolist() == want[0].tolist()
        assert top == want[1] and type(top) is int
    # where the ids are JSON's, orjson reads the same numbers
    assert orjson.loads(b"[" + text + b"]") == want[0].tolist()


def _orjson_agrees(text: bytes) -> None:
    """Where orjson reads the body as non-negative ints below 2**62, the parser must take it;
    where orjson refuses it, the parser must too."""
    got = _native(text)
    try:
        value = orjson.loads(b"[" + text + b"]")
    except orjson.JSONDecodeError:
        assert got is None, text
        return
    plain = all(type(v) is int and 0 <= v < 2**62 for v in value)
    if got is None:
        # the parser declines anything but plain digits: a sign, "-0", a decimal, an exponent
        assert not plain or any(c in text for c in b"-.eE+"), text
    else:
        assert plain and got[0].tolist() == value, text


ODD = [
    b"",
    b" ",
    b"\r\n\t ",
    b"0",
    b"00",
    b"01",
    b"0,0",
    b"10,0,100",
    b"1,02",
    b"1, 02",
    b" 01",
    b"1 2",
    b"1 ,2 3",
    b"1,\n2",
    b"1\t,\t2 ",
    b"1,,2",
    b"1, ,2",
    b",1",
    b"1,",
    b"1, ",
    b" ,",
    b",",
    b" , ",
    b"-1",
    b"-0",
    b"+1",
    b"1.0",
    b"1e3",
    b"1E3",
    b"1,2.5",
    b"0x10",
    b"true",
    b'"1"',
    b"[1]",
    b"1\x00",
    b"\x001",
    b"1\x0b,2",
    b"1\x0c",
    b"\xa01",
    b"\xff",
    b"99999999999999999999999,1",
    b"4611686018427387903",
    b"4611686018427387904",
    b"00000000000000000000000000000000000001",
    b"1" * 200,
]


@pytest.mark.parametrize("text", ODD)
def test_odd_texts(text):
    _same(text)
    _orjson_agrees(text)


@pytest.mark.parametrize("value", EDGES)
def test_numbers_near_the_limits(value):
    for text in (str(value).encode(), b"1," + str(value).encode(), str(value).encode() + b" ,7"):
        _same(text)
        _orjson_agrees(text)


_ids = st.lists(st.one_of(st.integers(0, 2**31 + 5), st.sampled_from(EDGES), st.integers(0, 2**65)), max_size=40)


@st.composite
def spaced(draw):
    """A valid body (or an odd one) with whitespace drawn around and inside each element."""
    ids = draw(_ids)
    parts = []
    for value in ids:
        digits = str(value).encode()
        if draw(st.integers(0, 9)) == 0:
            digits = b"0" * draw(st.integers(1, 3)) + digits  # a leading zero
        if draw(st.integers(0, 19)) == 0:
            digits = (
                draw(st.sampled_from([b"-", b"+", b""])) + digits + draw(st.sampled_from([b".0", b"e1", b"", b" 1"]))
            )
        parts.append(draw(st.sampled_from(SPACE)) + digits + draw(st.sampled_from(SPACE)))
    if parts and draw(st.integers(0, 9)) == 0:
        parts.insert(draw(st.integers(0, len(parts))), draw(st.sampled_from(SPACE)))  # an empty element
    text = b",".join(parts)
    if draw(st.integers(0, 19)) == 0:
        text += b","
    if draw(st.integers(0, 19)) == 0:
        text = b"," + text
    return text


@settings(max_examples=1500, deadline=None)
@given(spaced())
def test_generated_bodies(text):
    _same(text)
    _orjson_agrees(text)


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes(text):
    _same(text)
    _orjson_agrees(text)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet="0123456789, \t\r\n-+.eE", max_size=60).map(str.encode))
def test_random_texts_of_the_bytes_that_matter(text):
    _same(text)
    _orjson_agrees(text)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet="0123456789,", max_size=120).map(str.encode))
def test_compact_texts(text):
    """Digits and commas only (the C pass's compact layout): empty elements, leading zeros,
    runs of any length, at every place relative to its sixteen-byte blocks."""
    _same(text)
    _orjson_agrees(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(0, 10**20), min_size=1, max_size=60), st.integers(0, 17), st.sampled_from([b"", b"0"]))
def test_compact_texts_around_the_blocks(ids, pad, zero):
    """Valid compact bodies shifted by up to a block (a leading "1..." or "0" element of each
    length), so each element's end falls at every place of a sixteen-byte block and of the
    last bytes, where fewer than eight bytes are left."""
    text = (zero + b"1" * pad + b"," if pad or zero else b"") + ",".join(map(str, ids)).encode()
    _same(text)
    _orjson_agrees(text)


@st.composite
def mutated(draw):
    """A plain json.dumps body with a few bytes replaced, inserted or deleted."""
    text = bytearray(orjson.dumps(draw(st.lists(st.integers(0, 2**40), min_size=1, max_size=30)))[1:-1])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.integers(0, 2))
        byte = draw(st.sampled_from([*b"0123456789, \t\r\n-+.eE\x00\xff]["]))
        if kind == 0 and at < len(text):
            text[at] = byte
        elif kind == 1:
            text.insert(at, byte)
        elif at < len(text):
            del text[at]
    return bytes(text)


@settings(max_examples=1500, deadline=None)
@given(mutated())
def test_mutated_valid_texts(text):
    _same(text)
    _orjson_agrees(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**62 - 1), max_size=3000))
def test_plain_bodies_take_the_c_path(ids):
    """Not vacuous: json.dumps bodies are read by C (and the wired function gives its answer)."""
    text = orjson.dumps(ids)[1:-1]
    got = _native(text)
    assert got is not None and got[0].tolist() == ids and got[1] == max(ids, default=0)
    _same(text)


def test_the_wired_function_calls_c(monkeypatch):
    calls = []
    real = id_arrays._NATIVE_IDS
    assert real is not None

    def counted(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(id_arrays, "_NATIVE_IDS", counted)
    arr, top = _parse_plain(b"3,1,2")
    assert calls == [b"3,1,2"] and arr.tolist() == [3, 1, 2] and top == 3
    assert arr.flags.writeable  # as numpy's own array is (the caller may write an arena from it)


def test_a_long_text_is_one_buffer_of_its_ids():
    ids = list(range(0, 2_000_000, 7))
    got = _native(orjson.dumps(ids)[1:-1])
    assert got is not None and got[0].tolist() == ids and got[1] == ids[-1]
    assert got[0].base is not None and len(got[0].base) == 8 * len(ids)  # resized to the ids, no more


def test_refuses_what_is_not_bytes():
    assert speedups.native is not None
    for value in ("1,2", bytearray(b"1,2"), memoryview(b"1,2"), None, 12):
        with pytest.raises(TypeError):
            speedups.native.plain_ids(value)  # type: ignore[arg-type]


# -- int32_ids: a JSON list of ids as int32 (tokens.token_ids) -------------------------------

_values = st.one_of(
    st.integers(0, 2**31 + 5),
    st.sampled_from(EDGES),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.floats(allow_nan=True),
    st.none(),
    st.text(max_size=3),
    st.lists(st.integers(0, 9), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)


def _token_ids_both(value, monkeypatch):
    from rollout_graph.ingest import tokens

    assert tokens._NATIVE_INT32 is not None
    results = []
    for converter in (tokens._NATIVE_INT32, None):
        monkeypatch.setattr(tokens, "_NATIVE_INT32", converter)
        problems = tokens.Problems()
        arr = tokens.token_ids(list(value), "token_ids", problems)
        results.append((arr, problems))
    (got, got_problems), (want, want_problems) = results
    assert got_problems == want_problems
    if want is None:
        assert got is None
    else:
        assert got is not None and got.dtype == want.dtype and got.shape == want.shape
        assert got.tolist() == want.tolist()
        assert got.flags.writeable == want.flags.writeable


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 200_000), _values), max_size=30))
def test_int32_ids_against_the_python_path(value):
    with pytest.MonkeyPatch.context() as monkeypatch:
        _token_ids_both(value, monkeypatch)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**31 - 1), max_size=500))
def test_int32_ids_take_plain_lists(value):
    """Not vacuous: a list of ids that fit int32 is converted by C."""
    assert speedups.native is not None
    buffer = speedups.native.int32_ids(value)
    if not value:
        assert buffer is None  # the caller's own empty array
        return
    assert type(buffer) is bytearray and np.frombuffer(buffer, dtype=np.int32).tolist() == value
    with pytest.MonkeyPatch.context() as monkeypatch:
        _token_ids_both(value, monkeypatch)


class _Int(int):
    pass


@pytest.mark.parametrize(
    "value",
    [[True], [1, False], [-1], [2**31], [2**31 - 1, 2**31], [2**63], [2**64], [1.0], [None], ["1"], [[1]], [_Int(3)]],
)
def test_int32_ids_declines_what_is_not_a_plain_int32(value):
    assert speedups.native is not None
    assert speedups.native.int32_ids(value) is None
    with pytest.MonkeyPatch.context() as monkeypatch:
        _token_ids_both(value, monkeypatch)


def test_int32_ids_declines_what_is_not_a_list():
    assert speedups.native is not None
    for value in ((1, 2), [], {1: 2}, b"12", None, np.array([1, 2])):
        assert speedups.native.int32_ids(value) is None
