"""The raw-bytes fast path for prompt-id arrays must give exactly what full JSON parsing gives,
or step aside: never a different array."""

from __future__ import annotations

import json

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.values.read import read_values
from tests.support.builders import examples

plain_ids = st.lists(st.integers(0, 2**31 - 1), max_size=80)
odd_values = st.one_of(
    st.integers(-5, 5),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.just(2**70),
    st.text(max_size=3),
)


def _dump(record: dict, style: str) -> bytes:
    separators = (",", ":") if style == "compact" else (", ", ": ")
    return json.dumps(record, separators=separators).encode()


@settings(max_examples=examples(400), deadline=None)
@given(
    st.lists(st.tuples(plain_ids, st.lists(odd_values, max_size=3), st.booleans()), min_size=1, max_size=6),
    st.sampled_from(["compact", "spaced"]),
)
def test_fast_path_agrees_with_plain_json(chunks, style):
    """Prompts that extend one another (the fast path reuses parsed prefixes), some with values
    the fast path must refuse (signs, floats, bools, strings, out-of-range numbers)."""
    lines, expected = [], []
    prompt: list = []
    for extension, odd, restart in chunks:
        prompt = (list(extension) if restart else prompt + list(extension)) + list(odd)
        record = {
            "request": {"messages": [{"role": "user", "content": 'has "input_ids":[1,2] inside'}]},
            "response": {"prompt_token_ids": prompt, "choices": []},
        }
        lines.append(_dump(record, style))
        expected.append(prompt)
        prompt = [v for v in prompt if type(v) is int and 0 <= v < 2**31]  # next prompt extends clean ids
    values = list(read_values(Source.from_bytes("t.jsonl", b"\n".join(lines))))
    for value, prompt in zip(values, expected, strict=True):
        got = value.value["response"]["prompt_token_ids"]
        if isinstance(got, np.ndarray):
            assert all(type(v) is int for v in prompt)
            assert got.tolist() == prompt
        else:
            assert got == prompt
        assert value.value["request"]["messages"][0]["content"] == 'has "input_ids":[1,2] inside'


def test_fast_path_is_taken_for_plain_arrays_and_prefixes_are_reused():
    base = list(range(100, 300))
    lines = [orjson.dumps({"response": {"prompt_token_ids": base + list(range(k))}}) for k in (0, 5, 9)]
    values = [v.value["response"]["prompt_token_ids"] for v in read_values(Source.from_bytes("t", b"\n".join(lines)))]
    assert all(isinstance(v, np.ndarray) for v in values)
    assert values[2].tolist() == base + list(range(9))


def test_document_input_ids_take_the_fast_path_and_node_ids_do_not():
    doc = {"turns": [], "sequences": [{"node_ids": ["a", "b"], "input_ids": [1, 2, 3]}]}
    (value,) = read_values(Source.from_bytes("d.json", orjson.dumps(doc)))
    seq = value.value["sequences"][0]
    assert isinstance(seq["input_ids"], np.ndarray) and seq["node_ids"] == ["a", "b"]
