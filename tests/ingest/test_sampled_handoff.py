"""A vLLM choice's sampled side handed from the typed decoder (graph/ingest/shortcuts/logprob_entries.py) to the
engine-pair reading with its tokens joined once (``LogprobColumns.joined``).

- ``logprob_entries.joined_tokens`` gives a text exactly when it stands for the tokens (all strings, no
  comma in any: split at its commas it is the tokens again);
- ``tokens.token_id_list`` of that text says what ``tokens.all_token_id_texts`` says of the tokens;
- the deferred alternatives' check hash (``logprob_entries._check``) tells apart every pair of token lists
  the tuple hash told apart (commas moved between tokens included), and both of its call sites
  (the load, ``decode_top`` reading the file again) agree;
- whole loads with the shortcut on equal loads with it off.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest import tokens
from rollout_graph.ingest.files.sources import FileRef, Source
from rollout_graph.ingest.formats import engine_pair
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.load.files import load_paths
from rollout_graph.ingest.shortcuts import logprob_entries, logprob_spans
from tests.ingest.test_parse_fast_paths import ODD_TOKENS, PREFIX_BYTES_TOKENS, any_token, near_id_text, token_text
from tests.support.builders import Turn, assert_same_load, vllm_chat

odd_token = st.one_of(token_text, near_id_text, any_token, st.sampled_from(ODD_TOKENS + PREFIX_BYTES_TOKENS))


def _old_check(toks: list, lps: list) -> int:
    """The check hash as it was before the joined text (a tuple of the tokens)."""
    return hash((tuple(toks), tuple(lps)))


@settings(deadline=None, max_examples=400)
@given(st.lists(odd_token, max_size=10))
def test_the_joined_text_stands_for_the_tokens_exactly(values):
    joined = logprob_entries.joined_tokens(values)
    if joined is None:
        assert not values or not all(type(v) is str for v in values) or any("," in v for v in values)
    else:
        assert joined.split(",") == values


@settings(deadline=None, max_examples=400)
@given(st.lists(odd_token, max_size=10))
def test_the_token_id_test_of_the_joined_text_is_the_test_of_the_tokens(values):
    full = bool(values) and type(values[0]) is str and tokens.all_token_id_texts(values)
    assert tokens.token_id_list(logprob_entries.joined_tokens(values)) == full


def test_the_token_id_test_on_plain_and_edge_texts():
    assert tokens.token_id_list(logprob_entries.joined_tokens([f"token_id:{i}" for i in range(1, 3000)]))
    assert tokens.token_id_list(logprob_entries.joined_tokens(["token_id:999999999999999999"]))  # 18 digits
    assert not tokens.token_id_list(logprob_entries.joined_tokens(["token_id:1000000000000000000"]))  # 19
    assert tokens.token_id_list(logprob_entries.joined_tokens(["token_id:0", "token_id:10", "token_id:0"]))  # id 0
    for odd in (
        [],
        ["token_id:5,token_id:6"],
        ["token_id:5", 5],
        ["token_id:5", None],
        ["token_id:00"],
        ["token_id:01"],
    ):
        assert not tokens.token_id_list(logprob_entries.joined_tokens(odd)), odd


odd_number = st.one_of(
    st.floats(-5, 0),
    st.floats(allow_nan=False),
    st.integers(-(2**70), 2**70),
    st.integers(-(2**53) - 2, -(2**53) + 2),
    st.sampled_from([0, -0.0, 0.0, -1, -1.0, 2**53, -(2**53), 2.0**53, float("-inf"), float("inf"), None]),
    st.none(),
)


@settings(deadline=None, max_examples=400)
@given(st.lists(odd_token, max_size=6), st.lists(odd_token, max_size=6), st.lists(odd_number, max_size=6))
def test_the_check_tells_apart_what_the_tuple_hash_told_apart(a, b, lps):
    assume(_old_check(a, lps) != _old_check(b, lps))
    assert logprob_entries._check(a, lps) != logprob_entries._check(b, lps)
    joined, (floats, _) = logprob_entries.joined_tokens(a), logprob_entries.exact_floats(lps)
    assert logprob_entries._check(a, lps, joined, floats) == logprob_entries._check(a, lps)


@settings(deadline=None, max_examples=600)
@given(st.lists(odd_number, min_size=1, max_size=6), st.integers(0, 5), odd_number)
def test_the_check_tells_apart_logprobs_the_tuple_hash_told_apart(lps, i, other):
    changed = list(lps)
    changed[i % len(lps)] = other
    toks = [f"token_id:{k + 1}" for k in range(len(lps))]
    assume(_old_check(toks, lps) != _old_check(toks, changed))
    assert logprob_entries._check(toks, lps) != logprob_entries._check(toks, changed)


def test_the_float_bytes_stand_only_for_exact_numbers():
    floats, nonpositive = logprob_entries.exact_floats([-0.5, -1, 0])
    assert floats is not None and floats.tolist() == [-0.5, -1.0, 0.0] and nonpositive
    assert logprob_entries.exact_floats([-0.5, 0.25])[1] is False
    for odd in ([], [None], [-(2**53)], [2**53], [float("-inf")], [-(2**1100)], [-1.5, None]):
        assert logprob_entries.exact_floats(odd) == (None, False), odd
    toks = ["token_id:1"]
    # ints of 2**53 and more stay a tuple: -(2**53 + 1) would be -(2**53) as a float
    assert logprob_entries._check(toks, [-(2**53) - 1]) != logprob_entries._check(toks, [-(2**53)])
    # read by the generic parser (decode_top's second path), a string is not its number
    assert logprob_entries.exact_floats(["-1.5"], numbers=False) == (None, False)
    assert logprob_entries._check(toks, ["-1.5"], numbers=False) != logprob_entries._check(toks, [-1.5])
    assert logprob_entries._check(toks, [[-1.5]], numbers=False) != logprob_entries._check(toks, [-1.5])


@settings(deadline=None, max_examples=400)
@given(st.lists(st.one_of(odd_number, st.floats(-30, 0)), min_size=1, max_size=8))
def test_the_decoders_logprob_array_is_what_the_logprob_check_gives(values):
    span = _span([f"token_id:{k + 1}" for k in range(len(values))], values)
    columns = logprob_entries._sampled_only(span, FileRef("x", len(span), 0), 0)
    assume(columns is not None)  # not Infinity (not JSON), nor an int the decoder refuses
    assert columns is not None
    problems = tokens.Problems()
    full = tokens.logprobs(columns.logprobs, "logprobs", problems, True)
    if columns.logprob_array is not None:
        assert columns.logprob_array.dtype == full.dtype and columns.logprob_array.tobytes() == full.tobytes()
        assert problems == tokens.Problems()


def test_commas_moved_between_tokens_change_the_check():
    lps = [-0.5, -0.25]
    assert logprob_entries._check(["a,b", "c"], lps) != logprob_entries._check(["a", "b,c"], lps)
    assert logprob_entries._check(["a", "b"], lps) != logprob_entries._check(["a,b"], lps[:1])
    assert logprob_entries._check(["token_id:5", "token_id:6"], lps) != logprob_entries._check(
        ["token_id:5", "token_id:7"], lps
    )
    assert logprob_entries._check(["a", "b"], lps) != logprob_entries._check(["a", "b"], [-0.5, -0.3])


def _span(toks: list, lps: list) -> bytes:
    entries = [
        {"token": t, "logprob": v, "top_logprobs": [{"token": t, "logprob": v}]} for t, v in zip(toks, lps, strict=True)
    ]
    return json.dumps(entries, separators=(",", ":")).encode()  # ints of any size


@settings(deadline=None, max_examples=150)
@given(st.lists(st.one_of(token_text, near_id_text, st.integers(0, 9)), min_size=1, max_size=8), st.data())
def test_decode_top_accepts_its_own_load_and_refuses_a_changed_token(toks, data):
    lps = [-0.5] * len(toks)
    span = _span(toks, lps)
    columns = logprob_entries._sampled_only(span, FileRef("x", len(span), 0), 0)
    assume(columns is not None)  # a lone surrogate: the decoder refuses it (the eager path reads it)
    assert columns is not None and columns.joined == logprob_entries.joined_tokens(toks)
    check = columns.top._load.check  # the DeferredTop's hash, as the load computed it
    assert decode_ok(span, len(toks), check)
    i = data.draw(st.integers(0, len(toks) - 1))
    other = data.draw(st.one_of(token_text, near_id_text))
    assume(other != toks[i] and not (type(toks[i]) is int and other == str(toks[i])))
    changed = [*toks[:i], other, *toks[i + 1 :]]
    assume(_old_check(changed, lps) != _old_check(toks, lps))  # caught before (hash("") == hash(0))
    assert not decode_ok(_span(changed, lps), len(toks), check)


def decode_ok(span: bytes, rows: int, check: int) -> bool:
    return logprob_entries.decode_top(span, rows, check) is not None


# ------------------------------------------------------------------------------------------------
# Whole loads


def _same_loads(data: bytes) -> None:
    """With the shortcuts: from a plain file (the alternatives left in it, the logprob array built
    by the decoder); without: from bytes (decoded at once), the token_id:N shortcut off."""
    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0), tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_bytes(data)
        fast = load_paths([path])
        with mock.patch.object(engine_pair, "token_id_list", lambda _joined: False):
            slow = load_sources([Source.from_bytes(str(path), data)])
        assert_same_load(fast, slow)  # reads the deferred alternatives while the file is there


ODD_IDS: list[Any] = [None, [True, 2], [2, -1], "5"]
# Numbers an alternative's float32 holds (a larger one warns as it is cast: an error under pytest)
load_number = st.one_of(
    st.floats(-1e30, 1e30),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -0.0, -1, 2**53, -(2**53) - 1, None]),
    st.none(),
)


@settings(deadline=None, max_examples=100)
@given(
    st.lists(
        st.lists(st.tuples(st.one_of(token_text, near_id_text, any_token), load_number), min_size=1, max_size=5),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(["same", "absent", "odd"]),
    st.sampled_from(ODD_IDS),
)
def test_loads_agree_with_the_shortcuts_off(contents, ids, odd):
    records = []
    for i, entries in enumerate(contents):
        record = vllm_chat(Turn(f"c{i}", [1, 2, 3], [4 + k for k in range(len(entries))]))
        choice = record["response"]["choices"][0]
        choice["logprobs"] = {
            "content": [{"token": t, "logprob": v, "top_logprobs": [{"token": t, "logprob": v}]} for t, v in entries]
        }
        if ids == "absent":
            choice.pop("token_ids", None)
        elif ids == "odd":
            choice["token_ids"] = odd
        records.append(record)
    data = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)
    _same_loads(data)


def test_a_file_changed_in_a_token_or_by_a_moved_comma_gives_no_alternatives(tmp_path):
    def lines(toks: list[str]) -> bytes:
        record = vllm_chat(Turn("c0", [1, 2, 3], [4 + k for k in range(len(toks))]))
        choice = record["response"]["choices"][0]
        choice["logprobs"] = {
            "content": [{"token": t, "logprob": -0.5, "top_logprobs": [{"token": t, "logprob": -0.5}]} for t in toks]
        }
        return orjson.dumps(record) + b"\n"

    ids = [f"token_id:{i}" for i in range(100, 160)]
    toks = [*ids[:30], "ab,", "cd", *ids[30:]]
    path = tmp_path / "t.jsonl"
    path.write_bytes(lines(toks))
    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0):
        loaded = load_paths([path])
    call = next(c for s in loaded.sessions.values() for c in s.calls)
    assert call.top_k is not None and call.top_k.pending
    moved = [*ids[:30], "ab", ",cd", *ids[30:]]  # the same bytes but for one comma moved between two tokens
    path.write_bytes(lines(moved))
    assert len(lines(moved)) == len(lines(toks))
    assert "changed since it was loaded" in (call.top_k.unavailable or "")


def test_a_reread_span_with_a_list_for_a_logprob_is_refused_not_raised():
    toks, lps = ["token_id:5", "token_id:6"], [-0.5, -0.25]
    check = logprob_entries._check(toks, lps)
    odd = _span(toks, [[-0.5], -0.25])  # the typed decoder refuses it: the generic path reads it
    assert logprob_entries.decode_top(odd, 2, check) is None
    assert logprob_entries.decode_top(_span(toks, lps), 2, check) is not None


def test_a_plain_file_takes_the_decoders_logprob_array(tmp_path):
    toks = [f"token_id:{i}" for i in range(100, 130)]
    record = vllm_chat(Turn("c0", [1, 2, 3], [100 + k for k in range(len(toks))]))
    record["response"]["choices"][0]["logprobs"] = {
        "content": [{"token": t, "logprob": -0.5, "top_logprobs": [{"token": t, "logprob": -0.5}]} for t in toks]
    }
    path = tmp_path / "t.jsonl"
    path.write_bytes(orjson.dumps(record) + b"\n")
    seen = []
    fill = engine_pair._fill_tokens

    def spy(call, prompt, ids, sampled, problems):
        seen.append(sampled.ready)
        return fill(call, prompt, ids, sampled, problems)

    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0), mock.patch.object(engine_pair, "_fill_tokens", spy):
        loaded = load_paths([path])
    call = next(c for s in loaded.sessions.values() for c in s.calls)
    assert call.top_k is not None and call.top_k.pending
    assert len(seen) == 1 and seen[0] is call.sampled_logprobs and call.sampled_logprobs.tolist() == [-0.5] * 30


def test_an_alternative_beyond_float32_is_minus_infinity_without_a_warning():
    """A logprob finite in float64 but beyond float32's range becomes -inf in the alternatives,
    silently: numpy's overflow warning would reach the terminal (pytest makes it an error)."""
    import warnings

    import numpy as np

    from rollout_graph.ingest.tokens import top_k

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        top = top_k([2, 1], ["token_id:1", "token_id:2", "token_id:3"], [-0.5, -1e39, -1e300])
    assert top is not None
    assert top.logprobs[0, 0] == np.float32(-0.5)
    assert np.isneginf(top.logprobs[0, 1]) and np.isneginf(top.logprobs[1, 0])
    assert np.isnan(top.logprobs[1, 1])  # the padding of a shorter row stays NaN
