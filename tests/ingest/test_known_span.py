"""The id and logprob cutters skip a repeated ``messages`` prefix they know holds none of their
keys (MessageCutter.known, graph/ingest/files/search.py find_outside): the lines must parse exactly as
without the shortcut, also when an id key or ``top_logprobs`` sits in a message (as a key, whose
array is cut, or inside a text), old or new, and the skip must actually be taken."""

from __future__ import annotations

import orjson
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files.search import find_outside
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter
from rollout_graph.ingest.shortcuts.messages import OTHER_KEYS, MessageCutter
from rollout_graph.ingest.values.line import parse_line
from tests.support.builders import _same_value, examples

FILL = "lorem ipsum " * 200  # over the messages shortcut's minimum
ODD_TEXTS = [
    'see "prompt_token_ids":[1,2,3] here',
    'a "top_logprobs":[{"token":"x"}] text',
    "input_ids",
    '_ids"',
]


def _both(lines: list[bytes]) -> tuple[list[tuple], int]:
    """Each line parsed without the messages shortcut and with it; how often the skip was taken."""
    limits = Limits()
    plain, fast, messages = IdArrayCutter(), IdArrayCutter(), MessageCutter()
    taken = 0
    known = messages.known

    def counting(raw: bytes, pos: int = 0, end: int | None = None):
        nonlocal taken
        span = known(raw, pos, end)
        taken += span is not None
        return span

    messages.known = counting  # type: ignore[method-assign]
    out = []
    for i, line in enumerate(lines, start=1):
        out.append((parse_line(i, line, plain, limits), parse_line(i, line, fast, limits, messages=messages)))
    return out, taken


def _assert_same(lines: list[bytes]) -> int:
    out, taken = _both(lines)
    for want, got in out:
        assert got.error == want.error, (want.line, want.error, got.error)
        _same_value(want.value, got.value, f"line {want.line}")
    return taken


def _flat(messages: list, n: int) -> bytes:
    return orjson.dumps(
        {
            "prompt_token_ids": list(range(100, 200 + n)),
            "completion_token_ids": [5, 6, 7],
            "per_token_logps": [-0.5, -0.25, -0.125],
            "request": {"model": "m", "messages": messages, "temperature": 1.0},
            "finish_reason": "stop",
            "metadata": {"session_id": "s", "call_id": f"c{n}"},
        }
    )


def _pair(messages: list, n: int) -> bytes:
    content = [
        {"token": f"t{i}", "logprob": -0.5, "top_logprobs": [{"token": f"t{i}", "logprob": -0.5}]} for i in range(60)
    ]
    return orjson.dumps(
        {
            "call_id": f"c{n}",
            "session_id": "s",
            "request": {"model": "m", "messages": messages},
            "response": {
                "prompt_token_ids": list(range(100, 200 + n)),
                "choices": [{"index": 0, "logprobs": {"content": content}, "finish_reason": "stop"}],
            },
        }
    )


def _conversation(n: int, odd: dict[int, dict]) -> list[dict]:
    return [odd.get(i, {"role": "user" if i % 2 else "system", "content": f"{i}: {FILL}"}) for i in range(n)]


def test_a_clean_repeated_prefix_is_skipped_and_the_lines_parse_the_same():
    for shape in (_flat, _pair):
        lines = [shape(_conversation(n, {}), n) for n in range(1, 8)]
        assert _assert_same(lines) >= 5, shape.__name__


def test_an_id_key_or_top_logprobs_in_a_message_keeps_its_prefix_searched():
    for shape in (_flat, _pair):
        for text in ODD_TEXTS:
            odd = {2: {"role": "user", "content": text + FILL}}
            lines = [shape(_conversation(n, odd), n) for n in range(1, 8)]
            _assert_same(lines)
        # a message holding an id array as a key: cut by the id cutter, in old and new messages
        odd = {1: {"role": "user", "content": FILL, "input_ids": list(range(300))}}
        lines = [shape(_conversation(n, odd), n) for n in range(1, 8)]
        _assert_same(lines)
        lines = [shape(_conversation(n, {n - 1: odd[1]}), n) for n in range(1, 8)]
        _assert_same(lines)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.sampled_from([None, *ODD_TEXTS]), st.booleans()), min_size=1, max_size=8),
    st.booleans(),
)
def test_random_conversations_with_keys_in_messages_parse_the_same(steps, pair):
    """Conversations that grow, restart or hold odd messages anywhere, each line parsed both ways."""
    shape = _pair if pair else _flat
    messages: list = []
    lines = []
    for n, (grow, text, restart) in enumerate(steps):
        if restart:
            messages = []
        for i in range(grow):
            content = FILL if text is None or i else text + FILL
            messages = [*messages, {"role": "user", "content": f"{len(messages)} {content}"}]
        lines.append(shape(messages, n))
    _assert_same(lines)


@settings(max_examples=examples(400), deadline=None)
@given(
    st.text(alphabet='abK_ids"', max_size=40).map(str.encode),
    st.integers(0, 60),
    st.integers(0, 60),
    st.integers(0, 60),
    st.sampled_from(OTHER_KEYS),
)
def test_find_outside_equals_find_when_the_span_holds_no_key(raw, a, b, pos, key):
    raw = raw.replace(b"K", key)
    a, b = min(a, b, len(raw)), min(max(a, b), len(raw))
    assume(key not in raw[a:b])
    assert find_outside(raw, key, pos, len(raw), [(a, b)]) == raw.find(key, pos, len(raw))


def test_known_gives_a_span_only_for_a_remembered_body_without_the_keys():
    for odd, clean in (
        ({"role": "user", "content": FILL}, True),
        ({"role": "user", "content": FILL, "top_logprobs": [{"token": "x"}]}, False),
        ({"role": "user", "content": "input_ids" + FILL, "input_ids": "not ids"}, False),
    ):
        cutter = MessageCutter()
        first, second = (_flat(_conversation(n, {0: odd}), n) for n in (2, 3))
        assert cutter.cut(first) is not None
        cutter.keep()
        span = cutter.known(second)
        if clean:
            assert span is not None and first.find(second[span[0] : span[1]]) > 0
            assert not any(key in second[span[0] : span[1]] for key in OTHER_KEYS)
        else:
            assert span is None


@settings(max_examples=examples(400), deadline=None)
@given(
    st.text(alphabet='ab"messagK', max_size=50).map(str.encode),
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 12)), max_size=4),
    st.sampled_from([b'"messages"', b'"content"', b"K", b"ab"]),
)
def test_find_outside_finds_the_first_key_not_wholly_inside_a_span(raw, picks, key):
    """The spans' bytes are not searched (an occurrence wholly inside one is not found; one
    crossing an edge is): on spans holding no key, ``bytes.find``."""
    spans, at = [], 0
    for start, length in sorted(picks):
        start = max(start, at)
        if start + length > len(raw):
            break
        spans.append((start, start + length, None))
        at = start + length + 1
    inside = {i for a, b, _ in spans for i in range(a, b - len(key) + 1)}
    want = next((i for i in range(len(raw)) if raw.startswith(key, i) and i not in inside), -1)
    assert find_outside(raw, key, 0, len(raw), spans) == want
