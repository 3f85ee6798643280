"""The vLLM chat shape's parse shortcuts give exactly what the per-value paths give.

Each shortcut is compared with the validating path it replaces, on odd input made to break it:
the logprob tokens' ``token_id:N`` strings read in one pass over their joined bytes
(``tokens._token_id_texts``) against the per-token reading; whole loads of vLLM chat records with
odd tokens through both.
"""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest import tokens
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.shortcuts import logprob_spans
from rollout_graph.ingest.values import line as line_module
from tests.support.builders import Turn, assert_same_load, vllm_chat


def _per_token(values: list) -> tokens.SplitTokens:
    with mock.patch.object(tokens, "_token_id_texts", lambda _tokens: None):
        return tokens.split_tokens(values)


def _same(a: tokens.SplitTokens, b: tokens.SplitTokens) -> None:
    assert a.ids.dtype == b.ids.dtype
    np.testing.assert_array_equal(a.ids, b.ids)
    assert a.texts == b.texts
    assert a.invalid == b.invalid
    assert a.all_ids == b.all_ids


# Near misses of "token_id:N": each must be read as the per-token regex reads it.
ODD_TOKENS = [
    "token_id:5token_id:6",  # two ids in one token
    "token_id: 5",
    "token_id:+5",
    "token_id:-5",
    "token_id:5\n",
    "token_id:5 ",
    "token_id:",
    "token_id:5,6",
    "token_id:5,token_id:6",
    "token_id:0",
    "token_id:007",
    "token_id:" + "0" * 40 + "1",  # 50 characters: beyond parse_token_id_text's length bound
    "token_id:999999999999999999",  # 18 digits
    "token_id:1000000000000000000",  # 19 digits
    "token_id:9223372036854775807",  # int64 max
    "token_id:9223372036854775808",  # one beyond
    "token_id:" + "9" * 30,
    "token_id:٣",  # an Arabic-Indic digit: \\d matches it
    "token_id:5\u00e9",
    "token_id:\ud800",  # a lone surrogate (cannot be encoded)
    "xtoken_id:5",
    "TOKEN_ID:5",
    "token_id:5.0",
    "token_id:1e3",
    "",
    "hello",
    ",",
]


@pytest.mark.parametrize("odd", ODD_TOKENS)
@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_near_miss_token_anywhere_is_read_as_the_per_token_path_reads_it(odd, where):
    values = ["token_id:12", "token_id:345", "token_id:6789"]
    values.insert(where, odd)
    _same(tokens.split_tokens(values), _per_token(values))


def test_two_ids_in_one_token_are_text_not_two_ids():
    """The shortcut before this one read ["token_id:5token_id:6", "7"] as the ids [56, 7]."""
    split = tokens.split_tokens(["token_id:5token_id:6", "7"])
    assert split.texts == ["token_id:5token_id:6", "7"]
    assert split.ids.tolist() == [-1, -1]


def test_the_shortcut_is_taken_for_plain_token_id_texts():
    values = [f"token_id:{i}" for i in range(1, 500)]
    ids = tokens._token_id_texts(values)
    assert ids is not None and ids.tolist() == list(range(1, 500))
    _same(tokens.split_tokens(values), _per_token(values))


token_text = st.one_of(
    st.integers(1, 2**64).map(lambda i: f"token_id:{i}"),
    st.integers(1, 300).map(lambda i: f"token_id:{i}"),
    st.sampled_from(ODD_TOKENS),
    st.text(alphabet="token_id:0123456789,+- \n٣", max_size=14),
    st.text(max_size=4),
)
any_token = st.one_of(token_text, st.integers(-3, 2**65), st.none(), st.booleans(), st.floats(allow_nan=False))


@settings(deadline=None, max_examples=400)
@given(st.lists(token_text, max_size=12))
def test_token_texts_agree_with_the_per_token_path(values):
    _same(tokens.split_tokens(values), _per_token(values))


@settings(deadline=None, max_examples=200)
@given(st.lists(any_token, max_size=8))
def test_mixed_tokens_agree_with_the_per_token_path(values):
    assume(any(isinstance(v, str) for v in values))  # ints alone take the integer shortcut
    _same(tokens.split_tokens(values), _per_token(values))


def _load(data: bytes, fast: bool):
    if fast:
        with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0):
            return load_sources([Source.from_bytes("t.jsonl", data)])
    with (
        mock.patch.object(line_module, "holds_alternatives", lambda *a: False),
        mock.patch.object(line_module, "located_span", lambda raw, *_: None),
        mock.patch.object(tokens, "_token_id_texts", lambda _tokens: None),
    ):
        return load_sources([Source.from_bytes("t.jsonl", data)])


@settings(deadline=None, max_examples=60)
@given(st.lists(st.lists(token_text, min_size=1, max_size=6), min_size=1, max_size=3), st.booleans())
def test_loads_with_odd_tokens_agree_with_the_validating_path(contents, with_token_ids):
    """Calls, findings (token_strings, invalid_token_id) and the report are the same."""
    lines = []
    for i, toks in enumerate(contents):
        record = vllm_chat(Turn(f"c{i}", [1, 2, 3], [4] * len(toks)))
        choice = record["response"]["choices"][0]
        choice["logprobs"] = {
            "content": [{"token": t, "logprob": -0.5, "top_logprobs": [{"token": t, "logprob": -0.5}]} for t in toks]
        }
        if not with_token_ids:
            choice.pop("token_ids", None)
        lines.append(json.dumps(record, separators=(",", ":")).encode())
    data = b"\n".join(lines) + b"\n"
    fast, slow = _load(data, True), _load(data, False)
    assume(slow.loaded)
    assert_same_load(fast, slow)


# ------------------------------------------------------------------------------------------------
# Fewer numpy calls per call: the conversions give what the code before them gave (kept here as
# the reference: every value looked at, every check made)


def _reference_float_array(values: list) -> np.ndarray:
    if set(map(type, values)) <= {float, int}:
        try:
            arr = np.array(values, dtype=np.float64)
        except OverflowError:
            arr = np.array([v if tokens._valid_logprob(v) else np.nan for v in values], dtype=np.float64)
        arr[~np.isfinite(arr)] = np.nan
        return arr
    return np.array([v if tokens._valid_logprob(v) else np.nan for v in values], dtype=np.float64)


def _reference_logprobs(values: list, problems: tokens.Problems) -> np.ndarray:
    arr = _reference_float_array(values)
    bad = np.flatnonzero(np.isnan(arr))
    if bad.size:
        problems.invalid_logprobs.append(tokens._describe(values, bad.tolist(), "lp"))
    positive = np.flatnonzero(arr > 0)
    if positive.size:
        problems.positive_logprobs.append(tokens._describe(values, positive.tolist(), "lp"))
    return arr


def _reference_token_ids(value: list, problems: tokens.Problems) -> np.ndarray:
    bad = [i for i, v in enumerate(value) if not tokens._valid_id(v)]
    if bad:
        problems.invalid_ids.append(tokens._describe(value, bad, "ids"))
    return tokens._narrow(np.array([v if tokens._valid_id(v) else tokens.INVALID_ID for v in value], dtype=np.int64))


logprob_value = st.one_of(
    st.floats(-30, 0),
    st.floats(),  # NaN, infinities, positives, huge
    st.integers(-(2**1100), 2**1100),
    st.integers(-3, 3),
    st.sampled_from([10**300, 10**305, -(10**305), 0.0, -0.0, 1e308, -1e308]),
    st.none(),
    st.booleans(),
    st.text(max_size=2),
)


@settings(deadline=None, max_examples=400)
@given(st.lists(logprob_value, max_size=10))
def test_logprobs_agree_with_the_reference(values):
    got, want = tokens.Problems(), tokens.Problems()
    a, b = tokens.logprobs(values, "lp", got), _reference_logprobs(values, want)
    np.testing.assert_array_equal(a, b)
    assert a.dtype == b.dtype
    assert got == want


id_value = st.one_of(
    st.integers(0, 2**31 - 1),
    st.integers(-(2**31) - 2, 2**64 + 2),
    st.sampled_from([2**31 - 1, 2**31, -1, 0, 2**63 - 1, 2**63, -(2**31), -(2**31) - 1]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.text(max_size=2),
)


@settings(deadline=None, max_examples=400)
@given(st.lists(id_value, min_size=1, max_size=10))
def test_token_ids_agree_with_the_reference(value):
    assume(not any(isinstance(v, (list, dict)) for v in value))
    got, want = tokens.Problems(), tokens.Problems()
    a, b = tokens.token_ids(value, "ids", got), _reference_token_ids(value, want)
    assert a is not None
    assert a.dtype == b.dtype, (value, a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b)
    assert got == want


# ------------------------------------------------------------------------------------------------
# The content array found by bytes (logprob_spans.located_span, confirmed by logprob_spans.placed) when the same
# bytes occur elsewhere in the record: an echoed response in the request, a second choice, a
# message text naming the keys


def _echo_in_request(record: dict) -> None:
    echoed = {"role": "assistant", "content": "x", "logprobs": {"content": [{"token": "token_id:9", "logprob": -1}]}}
    record["request"]["messages"].append(echoed)


def _echo_only_in_request(record: dict) -> None:
    """The request's echoed choice is the only place the bytes say: it decodes, placed() refuses it."""
    echoed = {"logprobs": {"content": [{"token": "token_id:9", "logprob": -1}] * 3}, "finish_reason": "stop"}
    record["request"]["messages"].append({"role": "assistant", "content": "x", "choice": echoed})
    record["response"]["choices"][0]["logprobs"] = None


def _second_choice(record: dict) -> None:
    choice = json.loads(json.dumps(record["response"]["choices"][0]))
    choice["index"] = 1
    record["response"]["choices"].append(choice)


def _keys_in_text(record: dict) -> None:
    record["request"]["messages"][-1]["content"] = '"logprobs":{"content":[ and ]},"finish_reason"'


def _finish_after_usage(record: dict) -> None:
    choice = record["response"]["choices"][0]
    choice["finish_reason"] = choice.pop("finish_reason")  # the key after token_ids now


def _content_last(record: dict) -> None:
    choice = record["response"]["choices"][0]
    choice["logprobs"] = choice.pop("logprobs")


@pytest.mark.parametrize(
    "change",
    [_echo_in_request, _echo_only_in_request, _second_choice, _keys_in_text, _finish_after_usage, _content_last],
)
def test_a_located_cut_agrees_with_the_validating_path_when_the_bytes_recur(change, tmp_path):
    lines = []
    for i in range(3):
        record = vllm_chat(Turn(f"c{i}", [1, 2, 3, 4 + i], [5, 6, 7, 8]))
        change(record)
        lines.append(json.dumps(record, separators=(",", ":")).encode())
    data = b"\n".join(lines) + b"\n"
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)  # a plain file: the alternatives are left in it (the located path's case)
    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0):
        fast = load_sources([Source.from_path(path)])
    with (
        mock.patch.object(line_module, "holds_alternatives", lambda *a: False),
        mock.patch.object(line_module, "located_span", lambda raw, *_: None),
    ):
        slow = load_sources([Source.from_path(path)])
    assert fast.loaded == slow.loaded > 0
    assert_same_load(fast, slow)


# ------------------------------------------------------------------------------------------------
# The token_id:N check by deleting the prefix's bytes (one translate) instead of replacing the
# prefix, without a count of the commas: tokens holding those bytes, or commas, anywhere else


PREFIX_BYTES_TOKENS = [
    "token_id:5d",
    "token_id:d5",
    "token_id:5:",
    "token_id::5",
    "token_id:id:5",
    "token_id:5_6",
    "token_id:5token_id:",
    "token_id:5,",
    ",token_id:5",
    "token_id:5,,token_id:6",
    "token_id:5,token_id:6,token_id:7",
    "tokentoken_id:5",
    "oken_id:5",
    "token_id5",
    "token_id:5e",
]


@pytest.mark.parametrize("odd", PREFIX_BYTES_TOKENS)
@pytest.mark.parametrize("where", [0, 1, 3])
def test_the_prefix_bytes_or_a_comma_outside_a_prefix_take_the_per_token_path(odd, where):
    values = ["token_id:12", "token_id:345", "token_id:6789"]
    values.insert(where, odd)
    assert tokens._token_id_texts(values) is None
    _same(tokens.split_tokens(values), _per_token(values))


near_id_text = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from(["token_id:", "token_id:", "token_id:", "", "token_id", ",token_id:"]),
    st.text(alphabet="0123456789,token_id:", min_size=0, max_size=8),
)


@settings(deadline=None, max_examples=500)
@given(st.lists(st.one_of(near_id_text, st.integers(1, 10**6).map(lambda i: f"token_id:{i}")), min_size=1, max_size=8))
def test_texts_made_of_the_prefix_digits_and_commas_agree_with_the_per_token_path(values):
    _same(tokens.split_tokens(values), _per_token(values))


# The typed decoder's logprobs (ints, floats, None) read without a look at their types
typed_logprob = st.one_of(
    st.floats(-30, 0),
    st.floats(allow_nan=False),  # infinities, positives, huge
    st.integers(-(2**1100), 2**1100),
    st.integers(-3, 3),
    st.sampled_from([-1e308, -(10**308), -(10**309), float("-inf"), -0.0, 0, 0.0, 5e-324]),
    st.none(),
)


@settings(deadline=None, max_examples=500)
@given(st.lists(typed_logprob, max_size=10))
def test_typed_logprobs_agree_with_the_full_check(values):
    got, want = tokens.Problems(), tokens.Problems()
    a, b = tokens.logprobs(values, "lp", got, numbers=True), _reference_logprobs(values, want)
    np.testing.assert_array_equal(a, b)
    assert a.dtype == b.dtype
    assert got == want


def test_typed_logprobs_take_the_shortcut_and_still_refuse_minus_infinity():
    got = tokens.Problems()
    with mock.patch.object(tokens, "_float_array", side_effect=AssertionError("the full check ran")):
        arr = tokens.logprobs([-0.5, -1, -2.25, -(10**20)], "lp", got, numbers=True)
    assert arr.tolist() == [-0.5, -1.0, -2.25, -1e20] and got == tokens.Problems()
    arr = tokens.logprobs([-0.5, float("-inf"), -1e308, -1e308], "lp", got, numbers=True)
    assert np.isnan(arr[1]) and got.invalid_logprobs == ["lp[1] = -inf"]


odd_logprob_json = st.sampled_from(
    ["-0.5", "-1", "0", "-0", "1", "0.25", "null", "-1e308", "1e400", "-1e400", "2", "-3"]
)


@settings(deadline=None, max_examples=60)
@given(st.lists(st.lists(odd_logprob_json, min_size=1, max_size=6), min_size=1, max_size=3), st.booleans())
def test_loads_with_odd_logprobs_agree_with_the_validating_path(contents, with_token_ids):
    """Typed columns (logprobs read without a type look) against the generic path, whole loads."""
    lines = []
    for i, lps in enumerate(contents):
        record = vllm_chat(Turn(f"c{i}", [1, 2, 3], [4] * len(lps)))
        choice = record["response"]["choices"][0]
        choice["logprobs"] = {"content": "CONTENT"}
        if not with_token_ids:
            choice.pop("token_ids", None)
        entries = ",".join(
            f'{{"token":"token_id:{4 + k}","logprob":{lp},"top_logprobs":[{{"token":"token_id:4","logprob":-1}}]}}'
            for k, lp in enumerate(lps)
        )
        lines.append(json.dumps(record, separators=(",", ":")).replace('"CONTENT"', f"[{entries}]").encode())
    data = b"\n".join(lines) + b"\n"
    fast, slow = _load(data, True), _load(data, False)
    assert_same_load(fast, slow)


def test_every_short_text_of_the_prefix_digits_and_commas_agrees_with_the_per_token_path():
    """Exhaustive over short tails: every text of up to two of these bytes, bare, after
    ``token_id`` and after ``token_id:``, alone and among valid tokens."""
    alphabet = "0123456789,t:d_"
    tails = [""] + [a + b for a in alphabet for b in [""] + list(alphabet)]
    for tail in tails:
        for token in (tail, "token_id" + tail, "token_id:" + tail):
            for values in ([token], [token, "token_id:12"], ["token_id:7", token, "token_id:123"]):
                _same(tokens.split_tokens(values), _per_token(values))
