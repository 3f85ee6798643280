"""Shortcuts in reading an engine pair's record give what the plain code gave: the dialect's
content-block scan (one pass over the messages' content types, the loop for anything else), a
chat body not handed to as_chat_response, one sampling key read without the order's pass."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.core.dialects import ANTHROPIC_BLOCKS, _has_blocks, request_dialect
from rollout_graph.ingest.formats.dialect_bodies import as_chat_response
from rollout_graph.ingest.formats.engine_pair import _chat_body
from rollout_graph.ingest.formats.fields import SAMPLING_KEYS, sampling_params
from tests.support.builders import examples


def _plain_has_blocks(messages: Any, kinds: tuple[str, ...]) -> bool:
    """The loop the one-pass check stands in front of (the reference)."""
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in kinds for b in content):
            return True
    return False


_block = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from([*ANTHROPIC_BLOCKS, "text", "image", 7])}),
    st.fixed_dictionaries({"text": st.text(max_size=3)}),
    st.text(max_size=3),
    st.none(),
)
_content = st.one_of(
    st.text(max_size=5),
    st.none(),
    st.lists(_block, max_size=3),
    st.integers(),
    st.fixed_dictionaries({"type": st.sampled_from(ANTHROPIC_BLOCKS)}),
)
_message = st.one_of(
    st.fixed_dictionaries({"role": st.just("user"), "content": _content}),
    st.fixed_dictionaries({"role": st.just("assistant")}),  # no content key
    st.lists(_block, max_size=2),  # not an object
    st.text(max_size=3),
    st.none(),
    st.integers(),
)


@settings(max_examples=examples(400), deadline=None)
@given(st.one_of(st.lists(_message, max_size=6), st.none(), st.text(max_size=3), st.dictionaries(st.text(), st.text())))
def test_the_block_scan_says_what_the_loop_said(messages):
    assert _has_blocks(messages, ANTHROPIC_BLOCKS) == _plain_has_blocks(messages, ANTHROPIC_BLOCKS)
    body = {"model": "m", "messages": messages}
    want = "anthropic" if _plain_has_blocks(messages, ANTHROPIC_BLOCKS) else "chat"
    assert request_dialect(body) == want


def test_text_only_messages_are_chat_and_one_tool_result_block_is_anthropic():
    chat = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None},
    ]
    assert not _has_blocks(chat, ANTHROPIC_BLOCKS)
    blocks = [*chat, {"role": "user", "content": [{"type": "tool_result", "content": "ok"}]}]
    assert _has_blocks(blocks, ANTHROPIC_BLOCKS)
    assert not _has_blocks([*chat, {"role": "user", "content": [{"type": "text", "text": "t"}]}], ANTHROPIC_BLOCKS)


_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3))
_field = st.one_of(
    _json_scalars, st.lists(_json_scalars, max_size=2), st.dictionaries(st.text(max_size=2), _json_scalars, max_size=2)
)


@settings(max_examples=examples(400), deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["type", "object", "content", "output", "choices", "model", "stop_reason", "usage"]),
        st.one_of(_field, st.sampled_from(["message", "response", "chat.completion"])),
        max_size=6,
    )
    | st.lists(_field, max_size=3)
    | _json_scalars
)
def test_a_chat_body_left_as_it_is_is_what_as_chat_response_gives(response):
    """Objects with or without an Anthropic message's or a Responses object's marks, lists
    (streams), scalars: the same body as as_chat_response gives."""
    assert _chat_body(copy.deepcopy(response)) == as_chat_response(copy.deepcopy(response))


def _plain_sampling_params(body: dict) -> dict:
    params = {k: body[k] for k in SAMPLING_KEYS if k in body}
    nested = body.get("sampling_params")
    if isinstance(nested, dict):
        params.update({k: nested[k] for k in SAMPLING_KEYS if k in nested})
    return params


@settings(max_examples=examples(400), deadline=None)
@given(
    st.dictionaries(st.sampled_from([*SAMPLING_KEYS, "model", "messages", "logprobs"]), _json_scalars, max_size=6),
    st.none() | st.dictionaries(st.sampled_from([*SAMPLING_KEYS, "x"]), _json_scalars, max_size=3),
)
def test_the_sampling_params_are_those_of_the_plain_reading_in_its_order(body, nested):
    if nested is not None:
        body["sampling_params"] = nested
    got, want = sampling_params(body), _plain_sampling_params(body)
    assert got == want and list(got) == list(want)
