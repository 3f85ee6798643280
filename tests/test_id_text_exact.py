"""Raw id-array texts json.dumps never writes (leading zeros, numbers run together, odd
whitespace): the fast path in graph/ingest/id_arrays.py must give what the validating JSON parser
gives, an error included, whatever the array's prefix already seen."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.id_arrays import IdArrayCutter
from rollout_graph.ingest.reading import parse_line
from tests.builders import examples

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
