"""The record parse's C pieces (graph/ingest/csrc/token_texts.c and id_lists.c) against the Python they stand for:
``int32_ids`` (a list of ids as int32, or None for the Python path of ``tokens.token_ids``) and
``token_id_list`` (the ``tokens._TOKEN_ID_LIST`` fullmatch), on odd inputs: bools, floats, ids at
and past int32 and int64, negatives, other types; texts with leading zeros, 18 and 19 digits,
empty pieces, doubled or trailing commas, non-ASCII digits and letters, random and mutated text."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest import speedups, tokens
from tests.support.builders import examples

pytestmark = pytest.mark.skipif(speedups.native is None, reason="the C speedups are not built")
CHECKED = settings(max_examples=examples(2000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT32_MAX = 2**31 - 1

IDS = st.one_of(
    st.integers(0, 200_000),
    st.sampled_from([0, 1, INT32_MAX, INT32_MAX + 1, -1, -(2**31), 2**63 - 1, 2**63, 2**64, 10**30, -(10**30)]),
)
ODD = st.one_of(st.booleans(), st.floats(), st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2))


def expected_int32(value: list) -> np.ndarray | None:
    """The int32 array the Python path gives when every id is an int of 0 to 2**31 - 1."""
    if value and all(type(v) is int and 0 <= v <= INT32_MAX for v in value):
        return np.array(value, dtype=np.int32)
    return None


@CHECKED
@given(st.lists(IDS, max_size=40), st.lists(st.tuples(st.integers(0, 40), ODD), max_size=3))
def test_int32_ids(value, odd):
    for at, item in odd:
        value.insert(min(at, len(value)), item)
    packed = speedups.native.int32_ids(value)
    want = expected_int32(value)
    if want is None:
        assert packed is None
    else:
        assert np.frombuffer(packed, dtype=np.int32).tolist() == want.tolist()


@CHECKED
@given(st.lists(st.one_of(IDS, ODD), max_size=30))
def test_token_ids_on_and_off(value):
    """``tokens.token_ids`` gives the same array (values, dtype) and the same problems either way."""
    saved = speedups.native
    results = []
    try:
        for native in (saved, None):
            speedups.native = native
            problems = tokens.Problems()
            got = tokens.token_ids(list(value), "ids", problems)
            results.append((None if got is None else (got.dtype.str, got.tolist(), got.flags.writeable), problems))
    finally:
        speedups.native = saved
    assert results[0] == results[1]


PIECES = ["token_id:", "token_id:0", "token_id:00", "token_id:01", "token_id:7", "token_id:123", ",", ",,"]
PIECES += ["token_id:" + "9" * 18, "token_id:" + "1" * 19, "token_id:-1", "token_id:١", "Token_id:1", "token_id:1 "]
PIECES += ["token_id:1\n", "é", "token_id", "x", "token_id:12a", "0", "token_id::1"]


@CHECKED
@given(st.lists(st.sampled_from(PIECES), max_size=12), st.text(max_size=4), st.integers(0, 60))
def test_token_id_list_is_the_pattern(pieces, noise, at):
    joined = "".join(pieces)
    for text in (joined, ",".join(pieces), joined[:at] + noise + joined[at:], noise):
        assert speedups.native.token_id_list(text) == (tokens._TOKEN_ID_LIST.fullmatch(text) is not None)


@CHECKED
@given(st.lists(st.integers(0, 10**19), min_size=1, max_size=20), st.data())
def test_token_id_lists_of_ids(ids, data):
    text = ",".join(f"token_id:{i}" for i in ids)
    cut = data.draw(st.integers(0, len(text)))
    for probe in (text, text[:cut], text + ",", "," + text):
        assert speedups.native.token_id_list(probe) == (tokens._TOKEN_ID_LIST.fullmatch(probe) is not None)


def test_types():
    assert speedups.native.int32_ids((1, 2)) is None  # type: ignore[arg-type]  # not a list: declined (id_lists.c)
    with pytest.raises(TypeError):
        speedups.native.token_id_list(b"token_id:1")  # type: ignore[arg-type]
    assert speedups.native.int32_ids([]) is None
    assert speedups.native.token_id_list("") is False
