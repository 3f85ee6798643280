"""Raw id-array texts json.dumps never writes (leading zeros, numbers run together, odd
whitespace): the fast path in graph/ingest/shortcuts/id_arrays.py must give what the validating JSON parser
gives, an error included, whatever the array's prefix already seen."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter, _parse_plain, _zero_opens
from rollout_graph.ingest.values.line import parse_line
from tests.support.builders import examples

ODD = [
    b"01,2",
    b"1,02",
    b"1, 02",
    b" 01",
    b"00",
    b"0,0,10",
    b"10,0,100",
    b"0",
    b"1 2",
    b"1 ,2 3",
    b"1,\n2",
    b"1\t,\t2 ",
    b"1,,2",
    b",1",
    b"1,",
    b" , ",
    b"99999999999999999999999,1",
]


def _expected(body: bytes):
    try:
        return orjson.loads(b"[" + body + b"]")
    except orjson.JSONDecodeError:
        return None


def _got(line: bytes, cutter: IdArrayCutter):
    value = parse_line(1, line, cutter)
    if value.error is not None:
        return None
    ids = value.value["prompt_token_ids"]
    return ids.tolist() if isinstance(ids, np.ndarray) else ids


@pytest.mark.parametrize("body", ODD)
def test_odd_texts_give_what_the_json_parser_gives(body):
    assert _got(b'{"prompt_token_ids":[' + body + b"]}", IdArrayCutter()) == _expected(body)


@pytest.mark.parametrize("body", ODD)
def test_odd_tails_after_a_seen_prefix_give_what_the_json_parser_gives(body):
    """The prefix was parsed on an earlier line: only the tail goes through _parse_plain."""
    cutter = IdArrayCutter()
    prefix = b",".join(str(i).encode() for i in range(100, 200))
    assert _got(b'{"prompt_token_ids":[' + prefix + b"]}", cutter) == list(range(100, 200))
    line = b'{"prompt_token_ids":[' + prefix + b"," + body + b"]}"
    assert _got(line, cutter) == _expected(prefix + b"," + body)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet="0123456789, \t\n", min_size=1, max_size=40))
def test_any_text_of_digits_commas_and_spaces_parses_as_json_or_not_at_all(text):
    body = text.encode()
    assume(body.strip())
    got = IdArrayCutter()._ids(body)  # _parse_plain and the caller's checks on what it read
    expected = _expected(body)
    if got is None:
        return  # left to the validating path: always allowed
    assert expected is not None, body
    assert got.tolist() == expected


def _digit_count_verdict(text: bytes):
    """What _parse_plain said of compact text before it looked for a zero opening an element:
    numpy's numbers, kept only when they have as many digits as the text (the reference)."""
    if not text or text[:1] == b"," or text[-1:] == b",":
        return None if text else []
    try:
        arr = np.fromstring(text, dtype=np.int64, sep=",")
    except ValueError:
        return None
    n = arr.shape[0]
    if not n:
        return None
    top = int(arr.max())
    if top >= 2**62:
        return None
    digits = n + sum(int(np.count_nonzero(arr >= 10**k)) for k in range(1, 19))
    return arr.tolist() if digits == len(text) - (n - 1) else None


def _got_plain(text: bytes):
    parsed = _parse_plain(text)
    if parsed is None:
        return None
    arr, top = parsed
    assert arr.dtype == np.int64 and top == (int(arr.max()) if arr.shape[0] else 0)
    return arr.tolist()


_compact_elements = st.one_of(
    st.integers(0, 10**6).map(str),
    st.integers(0, 2**64).map(str),  # beyond 2**62 (clamped or not: refused either way)
    st.from_regex(r"0[0-9]{1,3}", fullmatch=True),  # a leading zero
    st.just("0"),
    st.just(""),  # an empty element
)


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(_compact_elements, min_size=1, max_size=300), st.integers(0, 3))
def test_compact_text_gives_what_the_digit_count_gave(elements, pad):
    """Compact text (digits and commas), short and long (the uint16 pair search from 256 bytes),
    zeros anywhere: the same ids, or None, as the digit count alone said."""
    text = ",".join(elements).encode()
    if pad == 1:
        text = b"1" * 300 + b"," + text  # long whatever the elements
    elif pad == 2:
        text = text + b"," + b"7" * 301
    assert _got_plain(text) == _digit_count_verdict(text), text[:80]


@pytest.mark.parametrize("size", [250, 251, 252, 253, 254, 255, 256, 257, 258, 511, 512, 513])
@pytest.mark.parametrize("at", ["start", "odd", "even", "end", "none", "zero alone"])
def test_a_zero_opening_an_element_is_found_at_either_alignment(size, at):
    """Elements of 3 and 4 digits in turn (their openings at both parities), the text as long as
    ``size`` or a little more: a zero opens the first element, one at an odd or an even offset,
    the last one (",0"), none, or one that is 0 (allowed)."""
    elements = []
    while len(",".join(elements)) < size:
        elements.append("123" if len(elements) % 2 else "4567")
    opens = [len(",".join(elements[:k])) + (1 if k else 0) for k in range(len(elements))]
    if at == "start":
        elements[0] = "0" + elements[0][1:]
    elif at in ("odd", "even"):
        k = next(k for k in range(1, len(elements)) if opens[k] % 2 == (1 if at == "odd" else 0))
        elements[k] = "0" + elements[k][1:]
    elif at == "end":
        elements.append("0")
    elif at == "zero alone":
        elements += ["0", "5"]
    text = ",".join(elements).encode()
    want = _digit_count_verdict(text)
    assert _zero_opens(text) == (text[:1] == b"0" or b",0" in text) == (at != "none")
    assert _got_plain(text) == want
    assert (want is None) == (at in ("start", "odd", "even"))
