"""The engine-pair parse's shortcuts give exactly what the paths they skip give.

Each shortcut is compared with the validating path on odd input made to break it:
- the ``token_id:N`` check of a choice that holds its ``token_ids`` (``tokens.all_token_id_texts``,
  no ids read) against the reading of the ids (``tokens._token_id_texts``, then the per-token path);
- the shape of a record known from its keys (``registry.plain_engine_pair``) against the shape tests
  one by one: whole loads, the same calls, findings and skip reasons (message and line);
- the chat readings taken from the request directly against ``chat_messages`` and friends;
- ``fields.message_list``, ``sampling_params`` and ``timing_of`` against the code before them.
"""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.core import dialects
from rollout_graph.ingest import tokens
from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.formats import engine_pair, fields, registry
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.shortcuts import logprob_spans
from rollout_graph.ingest.shortcuts.logprob_entries import LogprobColumns
from tests.ingest.test_parse_fast_paths import ODD_TOKENS, PREFIX_BYTES_TOKENS, any_token, near_id_text, token_text
from tests.support.builders import Turn, assert_same_load, vllm_chat


def _reads_ids(values: list) -> bool:
    """What the check must say: the reading of the ids takes every token as a valid id."""
    return bool(values) and type(values[0]) is str and tokens._token_id_texts(values) is not None


def _agree(values: list) -> None:
    fast = bool(values) and type(values[0]) is str and tokens.all_token_id_texts(values)
    assert fast == _reads_ids(values), values
    if fast:  # and then the split says so: no texts, nothing invalid, every one an id
        split = tokens.split_tokens(values)
        assert split.texts is None and split.invalid == () and split.all_ids


@pytest.mark.parametrize("odd", ODD_TOKENS + PREFIX_BYTES_TOKENS)
@pytest.mark.parametrize("where", [0, 1, 3])
def test_a_near_miss_token_anywhere_fails_the_check_as_the_reading_of_the_ids_fails(odd, where):
    values = ["token_id:12", "token_id:345", "token_id:6789"]
    values.insert(where, odd)
    _agree(values)
    _agree([odd])


def test_the_check_passes_plain_token_id_texts_and_long_lists():
    values = [f"token_id:{i}" for i in range(1, 20_000)]
    assert tokens.all_token_id_texts(values) and _reads_ids(values)
    assert tokens.all_token_id_texts(["token_id:999999999999999999"])  # 18 digits
    assert not tokens.all_token_id_texts(["token_id:1000000000000000000"])  # 19: the per-token path
    assert not tokens.all_token_id_texts([])
    assert not tokens.all_token_id_texts(["token_id:5", 5])
    assert not tokens.all_token_id_texts(["token_id:5", None])


@settings(deadline=None, max_examples=500)
@given(st.lists(st.one_of(token_text, near_id_text), max_size=12))
def test_token_texts_pass_the_check_exactly_when_their_ids_are_read(values):
    _agree(values)


@settings(deadline=None, max_examples=300)
@given(st.lists(st.one_of(any_token, near_id_text), max_size=8))
def test_mixed_tokens_pass_the_check_exactly_when_their_ids_are_read(values):
    _agree(values)


def test_every_short_text_of_the_prefix_digits_and_commas_is_checked_as_its_ids_are_read():
    alphabet = "0123456789,t:d_"
    tails = [""] + [a + b for a in alphabet for b in [""] + list(alphabet)]
    for tail in tails:
        for token in (tail, "token_id" + tail, "token_id:" + tail):
            for values in ([token], [token, "token_id:12"], ["token_id:7", token, "token_id:123"]):
                _agree(values)


def _sampled_fields(sampled: engine_pair._Sampled) -> dict:
    out = {}
    for name in engine_pair._Sampled.__slots__:
        if name != "ids":
            out[name] = getattr(sampled, name)
    return out


@settings(deadline=None, max_examples=300)
@given(st.lists(st.one_of(token_text, near_id_text, any_token), max_size=8), st.booleans())
def test_a_choice_with_its_ids_reads_its_logprob_entries_as_without_them(values, typed):
    """Everything but the ids (read from ``token_ids`` instead) is what the full reading gives."""
    lps = [-0.5] * len(values)
    if typed:
        content: Any = LogprobColumns(values, lps, [1] * len(values), values, lps)
    else:
        content = [
            {"token": v, "logprob": lp, "top_logprobs": [{"token": v, "logprob": lp}]}
            for v, lp in zip(values, lps, strict=True)
        ]
    fast, full = engine_pair._from_chat_logprobs(content, True), engine_pair._from_chat_logprobs(content, False)
    assert _sampled_fields(fast).keys() == _sampled_fields(full).keys()
    for name, value in _sampled_fields(full).items():
        got = _sampled_fields(fast)[name]
        if name == "top":
            assert (got is None) == (value is None)
            if value is not None:
                assert got.ids.tolist() == value.ids.tolist() and got.texts == value.texts
        else:
            assert got == value, name


# ------------------------------------------------------------------------------------------------
# Whole loads: every shortcut of this module on, against every one off


def _slow_load(data: bytes):
    with (
        mock.patch.object(engine_pair, "all_token_id_texts", lambda _tokens: False),
        mock.patch.object(engine_pair, "token_id_list", lambda _joined: False),
        mock.patch.object(registry, "plain_engine_pair", lambda _record: False),
        mock.patch.object(engine_pair, "CHAT", object()),  # never the dialect: the chat_* readings
    ):
        return load_sources([Source.from_bytes("t.jsonl", data)])


def _fast_load(data: bytes, typed_columns: bool = False):
    if typed_columns:  # the content arrays cut and decoded by the typed decoder (LogprobColumns)
        with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0):
            return load_sources([Source.from_bytes("t.jsonl", data)])
    return load_sources([Source.from_bytes("t.jsonl", data)])


def _lines(records: list) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


ODD_IDS: list[Any] = [
    None,
    "5",
    {"a": 1},
    [],
    [True, 2],
    [1.0, 2],
    [2, -1],
    [2, 2**40],
    [[2], [3]],
    [2, None],
]


valid_texts = st.lists(st.integers(1, 10**6).map(lambda i: f"token_id:{i}"), min_size=1, max_size=5)


@settings(deadline=None, max_examples=120)
@given(
    st.lists(st.one_of(valid_texts, st.lists(st.one_of(token_text, near_id_text), min_size=1, max_size=5)), max_size=3),
    st.sampled_from(["same", "absent", "shorter", "odd"]),
    st.sampled_from(ODD_IDS),
    st.booleans(),
)
def test_loads_with_odd_tokens_and_ids_agree_with_every_shortcut_off(contents, ids, odd, typed_columns):
    records = []
    for i, toks in enumerate(contents):
        record = vllm_chat(Turn(f"c{i}", [1, 2, 3], [4 + k for k in range(len(toks))]))
        choice = record["response"]["choices"][0]
        choice["logprobs"] = {
            "content": [{"token": t, "logprob": -0.5, "top_logprobs": [{"token": t, "logprob": -0.5}]} for t in toks]
        }
        if ids == "absent":
            choice.pop("token_ids", None)
        elif ids == "shorter":
            choice["token_ids"] = choice["token_ids"][:-1]
        elif ids == "odd":
            choice["token_ids"] = odd
        records.append(record)
    data = _lines(records)
    assert_same_load(_fast_load(data, typed_columns), _slow_load(data))


# Every top-level key a shape test before the engine pair's reads (written out here, not taken
# from the code under test), and the other keys an engine pair's reading looks at.
OTHER_SHAPES = {
    "rollout document": {"turns": [], "sequences": []},
    "verifiers trace": {"nodes": [{"message": {"role": "user", "content": "hi"}}]},
    "verifiers episode": {"traces": [{"nodes": []}]},
    "OTLP": {"resourceSpans": []},
    "OTLP snake case": {"resource_spans": []},
    "prime-rl": {"token_ids": [1, 2], "loss_mask": [0, 1], "schema_version": 1},
    "prime-rl logprobs": {"token_ids": [1, 2], "loss_mask": [0, 1], "inference_logprobs": [-0.5, -0.5]},
    "NeMo-RL": {"token_loss_mask": [0, 1]},
    "NeMo-RL generation": {"generation_logprobs": [-0.5], "input_lengths": [1]},
    "trace entry prompt": {"prompt_token_ids": [1, 2]},
    "trace entry completion": {"completion_token_ids": [3]},
    "trace entry logps": {"per_token_logps": [-0.5]},
    "trace entry tokens": {"completion_tokens": ["token_id:3"]},
}
SHAPE_KEYS = sorted({k for keys in OTHER_SHAPES.values() for k in keys})
SHAPE_KEYS += ["dialect", "error", "metadata", "timing", "step", "harness", "x"]
shape_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.text(max_size=3),
    st.just([]),
    st.just([{"message": {"role": "user", "content": "hi"}}]),
    st.just([{"nodes": []}]),
    st.just([1, 2, 3]),
    st.just([-0.5, -0.25]),
    st.just({"session_id": "m"}),
    st.sampled_from(["anthropic", "responses", "chat", "completions"]),
)


@settings(deadline=None, max_examples=300)
@given(st.dictionaries(st.sampled_from(SHAPE_KEYS), shape_value, max_size=4), st.integers(0, 4))
def test_any_keys_beside_request_and_response_give_what_the_shape_tests_give(extra, body):
    """Records the tests one by one would take for another shape (or refuse) are read as before."""
    record = vllm_chat(Turn("c0", [1, 2, 3], [4, 5], messages=[{"role": "user", "content": "hi"}]))
    if body == 1:
        record["response"] = {"error": "boom"}
    elif body == 2:
        record["request"] = "not an object"
    elif body == 3:
        record["response"]["object"] = "text_completion"
        record["response"]["choices"][0].pop("message")
        record["response"]["choices"][0]["text"] = "ok"
    record.update(extra)
    data = _lines([record])
    assert_same_load(_fast_load(data), _slow_load(data))


@pytest.mark.parametrize("shape", sorted(OTHER_SHAPES))
def test_an_engine_pair_with_another_shapes_keys_is_read_as_the_shape_tests_read_it(shape):
    record = {**vllm_chat(Turn("c0", [1, 2, 3], [4, 5])), **OTHER_SHAPES[shape]}
    assert not registry.plain_engine_pair(record)
    data = _lines([record])
    assert_same_load(_fast_load(data), _slow_load(data))


def test_an_engine_pair_is_known_from_its_keys_and_any_other_shape_key_takes_the_tests():
    record = vllm_chat(Turn("c0", [1, 2, 3], [4, 5]))
    assert registry.plain_engine_pair(record)
    assert registry.plain_engine_pair({**record, "metadata": {}, "dialect": "anthropic", "latency_s": 1})
    for keys in OTHER_SHAPES.values():
        for key in set(keys) - {"schema_version", "inference_logprobs"}:  # prime-rl's need token_ids
            assert not registry.plain_engine_pair({**record, key: None}), key
    assert not registry.plain_engine_pair({"request": {}})
    assert not registry.plain_engine_pair({"response": {}})


@pytest.mark.parametrize(
    "request_body",
    [
        {"messages": [{"role": "user", "content": "hi"}], "tools": [], "temperature": 0.5},
        {"messages": "x", "tools": {"a": 1}, "top_p": 1},
        {"input": [{"type": "message", "role": "user", "content": "hi"}], "max_output_tokens": 3},
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}], "system": "s"},
        {"messages": [{"role": "user", "content": "hi"}], "stop_sequences": ["x"], "max_tokens": 3},
        {},
    ],
)
@pytest.mark.parametrize("dialect", [None, "chat", "completions", "anthropic", "responses", "other"])
def test_the_chat_readings_taken_directly_are_what_the_dialect_readings_give(request_body, dialect):
    spoken = dialects.dialect_of(request_body, dialect)
    if spoken == dialects.CHAT:
        assert dialects.chat_messages(request_body, dialect=spoken) is request_body.get("messages")
        assert dialects.chat_tools(request_body, dialect=spoken) is request_body.get("tools")
        assert dialects.chat_sampling(request_body, dialect=spoken) is request_body
    record = {"request": request_body, "response": {"choices": [{"message": {"role": "assistant", "content": "x"}}]}}
    if dialect is not None:
        record["dialect"] = dialect
    data = _lines([record])
    assert_same_load(_fast_load(data), _slow_load(data))


# ------------------------------------------------------------------------------------------------
# fields.py: the code before the shortcuts, kept here as the reference


def _reference_message_list(value: Any, what: str, problems: tokens.Problems) -> list | None:
    if value is None:
        return None
    if not isinstance(value, list):
        problems.malformed.append(f"{what} is a {type(value).__name__}, not a list")
        return None
    kept = [m for m in value if isinstance(m, dict)]
    if len(kept) != len(value):
        problems.malformed.append(f"{what}: {len(value) - len(kept)} entries are not objects (dropped)")
    return kept


def _reference_sampling_params(body: dict) -> dict:
    params = {k: body[k] for k in fields.SAMPLING_KEYS if k in body}
    nested = body.get("sampling_params")
    if isinstance(nested, dict):
        params.update({k: nested[k] for k in fields.SAMPLING_KEYS if k in nested})
    return params


def _reference_timing_of(record: dict, response: dict | None = None) -> dict:
    timing: dict[str, Any] = {}
    for scope in (fields.as_dict(record.get("metadata")), fields.as_dict(record.get("timing")), record):
        if not fields._TIMING_SET.isdisjoint(scope):
            timing.update({k: scope[k] for k in fields.TIMING_KEYS if k in scope and scope[k] is not None})
    if response and isinstance(response.get("created"), (int, float)):
        timing.setdefault("created", response["created"])
    return timing


class _Dict(dict):
    pass


message = st.one_of(
    st.just({"role": "user", "content": "hi"}),
    st.builds(_Dict, role=st.just("user")),
    st.none(),
    st.text(max_size=2),
    st.integers(),
    st.just([]),
)


@settings(deadline=None, max_examples=300)
@given(st.one_of(st.none(), st.text(max_size=2), st.lists(message, max_size=6)))
def test_message_list_agrees_with_the_reference(value):
    got, want = tokens.Problems(), tokens.Problems()
    a, b = fields.message_list(value, "m", got), _reference_message_list(value, "m", want)
    assert a == b and got == want
    if a is not None:
        assert type(a) is list and a is not value
        assert all(x is y for x, y in zip(a, b, strict=True))


key = st.sampled_from([*fields.SAMPLING_KEYS, *fields.TIMING_KEYS, "sampling_params", "metadata", "timing", "x"])
value = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.text(max_size=2))
body = st.recursive(
    st.dictionaries(key, value, max_size=8), lambda inner: st.dictionaries(key, inner, max_size=4), max_leaves=12
)


@settings(deadline=None, max_examples=400)
@given(body)
def test_sampling_params_agree_with_the_reference(b):
    a, want = fields.sampling_params(b), _reference_sampling_params(b)
    assert a == want and list(a) == list(want)  # the keys in the same order (the JSON's)


@settings(deadline=None, max_examples=400)
@given(body, st.one_of(st.none(), st.dictionaries(st.just("created"), value)))
def test_timing_agrees_with_the_reference(record, response):
    assume(isinstance(record, dict))
    a, want = fields.timing_of(record, response), _reference_timing_of(record, response)
    assert a == want and list(a) == list(want)
