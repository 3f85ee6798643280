"""The ``messages`` prefix shortcut (graph/ingest/shortcuts/messages.py) gives exactly what parsing the
whole line gives, or steps aside: same values (key order, types, NaN), same errors, same
findings. Odd inputs: escapes, brackets and keys inside strings, unicode, a prefix that ends
mid-element, duplicate keys, NaN, lone surrogates, NUL escapes, trailing commas, deep nesting."""

from __future__ import annotations

import json
import random
import sys

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.limits import Limits
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.shortcuts import messages as message_prefix
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter
from rollout_graph.ingest.shortcuts.messages import MessageCutter, array_end
from rollout_graph.ingest.values.line import parse_line
from tests.support.builders import _same_value, assert_same_load, examples

FILL = "lorem ipsum " * 200  # 2.4 KB: an array over the shortcut's minimum


def _both(lines: list[bytes]) -> list[tuple]:
    """Each line parsed the validating way and with the shortcut (one cutter across the lines)."""
    limits = Limits()
    plain, fast, messages = IdArrayCutter(), IdArrayCutter(), MessageCutter()
    out = []
    for i, line in enumerate(lines, start=1):
        out.append((parse_line(i, line, plain, limits), parse_line(i, line, fast, limits, messages=messages)))
    return out


def _assert_same(lines: list[bytes]) -> None:
    for want, got in _both(lines):
        assert got.error == want.error, (want.line, want.error, got.error)
        _same_value(want.value, got.value, f"line {want.line}")


def _record(messages, **extra) -> bytes:
    return orjson.dumps({"request": {"model": "m", "messages": messages, "temperature": 1.0}, **extra})


def _conversation(n: int, text: str = FILL) -> list[dict]:
    return [{"role": "user" if i % 2 else "system", "content": f"{i}: {text}"} for i in range(n)]


def test_a_growing_conversation_reuses_its_messages_and_equals_the_whole_parse():
    lines = [_record(_conversation(n), metadata={"call_id": f"c{n}"}) for n in range(1, 8)]
    _assert_same(lines)
    values = [got.value["request"]["messages"] for _, got in _both(lines)]
    assert values[3][0] is values[4][0] and values[4][2] is values[6][2]  # the shortcut was taken
    assert values[3] is not values[4]  # each call its own list


def test_the_same_array_again_is_a_new_list_of_the_same_messages():
    line = _record(_conversation(3))
    (_, a), (_, b) = _both([line, line])
    assert a.value["request"]["messages"] == b.value["request"]["messages"]
    assert a.value["request"]["messages"] is not b.value["request"]["messages"]
    assert a.value["request"]["messages"][1] is b.value["request"]["messages"][1]


ODD_TEXTS = [
    'quote " and backslash \\ and \\" and \\\\" end',
    '"messages":[{"role":"user"}] inside a string ] } ] }',
    '],"temperature":1.0} the bytes that follow the array, inside a string',
    "unicode é € 😀 \u2028 \t tab\nnewline",
    "\\u0000 written out, and \\ud800 written out",
    '{"prompt_token_ids":[1,2,3]} as text',
]


@pytest.mark.parametrize("text", ODD_TEXTS)
def test_odd_texts_in_new_and_reused_messages(text):
    conv = _conversation(2) + [{"role": "tool", "content": text, "tool_call_id": "t1"}]
    lines = [_record(conv[: n + 1]) for n in range(len(conv))] + [_record([*conv, {"role": "user", "content": text}])]
    _assert_same(lines)
    _assert_same([json.dumps({"request": {"messages": conv}}, ensure_ascii=True).encode() for _ in range(2)])


def _raw_variants() -> list[list[bytes]]:
    base = _conversation(3)
    head = _record(base)
    body = orjson.dumps(base)[1:-1]
    nxt = orjson.dumps({"role": "user", "content": "next"})
    return [
        # a prefix that ends mid-element: the last element grows by a key, a number grows a digit
        [head, _record([*base[:2], {**base[2], "name": "x"}])],
        [_record([*base, 12]), _record([*base, 123]), _record([*base, 12.5]), _record([*base, 12, 3])],
        # a trailing comma after a reused prefix: invalid in both
        [head, b'{"request":{"messages":[' + body + b",]}}"],
        [head, b'{"request":{"messages":[' + body + b", ]}}"],
        # NaN, a lone surrogate, a NUL escape in a new element: the stdlib path decides
        [head, b'{"request":{"messages":[' + body + b',{"role":"user","content":NaN}]}}'],
        [head, b'{"request":{"messages":[' + body + b',{"role":"user","content":"\\ud800 x"}]}}'],
        [head, b'{"request":{"messages":[' + body + b',{"role":"user","content":"\\u0000"}]}}'],
        # NaN elsewhere in the line: the whole line the validating way, messages as that path reads them
        [head, b'{"request":{"messages":[' + body + b"," + nxt + b'],"temperature":NaN}}'],
        # duplicate keys: "messages" twice (the last counts), a message with a key twice
        [head, b'{"request":{"messages":[' + body + b'],"messages":[' + nxt + b"]}}"],
        [head, b'{"request":{"messages":[' + nxt + b'],"messages":[' + body + b"]}}"],
        [head, b'{"request":{"messages":[' + body + b',{"role":"user","role":"tool","content":"x"}]}}'],
        # duplicate identity keys at the top level stay an error
        [
            head,
            b'{"metadata":{"call_id":"a"},"call_id":"x","request":{"messages":[' + body + b'],"x":1},"call_id":"y"}',
        ],
        # an escaped quote before the key: not a key named "messages"
        [head, b'{"request":{"x\\"messages":[' + body + b"]}}"],
        # spaces around the key's colon and in the array
        [head, b'{"request":{"messages" : [ ' + body + b" , " + nxt + b" ] }}"],
        # a truncated line, a line that ends inside the array, a broken element
        [head, head[:-40]],
        [head, b'{"request":{"messages":[' + body + b',{"role":"user","content":"x"'],
        [head, b'{"request":{"messages":[' + body + b',{"role" "user"}]}}'],
        # an id array inside a message (cut by the id cutter: the shortcut steps aside)
        [head, b'{"request":{"messages":[' + body + b',{"role":"user","prompt_token_ids":[1,2,3]}]}}'],
        # the key in a string value, then the real key
        [b'{"note":"\\"messages\\":[1]","request":{"messages":[' + body + b"]}}"] * 2,
    ]


@pytest.mark.parametrize("lines", _raw_variants())
def test_odd_lines_parse_as_the_whole_parse_does(lines):
    _assert_same(lines)


def test_nesting_near_the_parser_limit_is_left_to_the_validating_path():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # the comparison recurses per level
    try:
        _deep_lines_agree()
    finally:
        sys.setrecursionlimit(limit)


def _deep_lines_agree() -> None:
    # orjson parses 1,024 levels: each line below is one level deeper than that, yet the array
    # cut out, or the line around it, alone is not.
    base = _conversation(2)
    body = orjson.dumps(base)[1:-1]
    lines = [_record(base)]
    for n in (1020, 1021):  # inside a new message
        lines.append(b'{"request":{"messages":[' + body + b',{"content":' + b"[" * n + b"]" * n + b"}]}}")
    for n in (1020, 1021):  # around the array
        lines.append(b'{"a":' + b"[" * n + b'{"messages":[' + body + b"]}" + b"]" * n + b"}")
    results = _both(lines)
    assert [want.error is None for want, _ in results] == [True, True, False, True, False]
    _assert_same(lines)
    limited = Limits(max_depth=20)
    for line in lines:
        want = parse_line(1, line, IdArrayCutter(), limited)
        messages = MessageCutter()
        parse_line(1, lines[0], IdArrayCutter(), limited, messages=messages)
        got = parse_line(1, line, IdArrayCutter(), limited, messages=messages)
        assert got.error == want.error
        _same_value(want.value, got.value, "limited")


def test_array_end_skips_strings_and_refuses_what_never_closes():
    raw = b'[{"a":"]}\\"]"},[1,[2]],"x"],"b":1'
    assert array_end(raw, 1) == raw.index(b'],"b"')
    assert array_end(b'["never closes', 1) is None
    assert array_end(b"[1,2", 1) is None
    assert array_end(b"[1,2}", 1) is None


# --- a property: random conversations, formats and damage -------------------------------------

_ALPHABET = st.sampled_from(list('ab "\\[]{},:\n\té€😀') + ["\u2028", "\x00", "\x7f"])
_TOKENS = {
    b'"@NAN@"': b"NaN",
    b"@SURR@": b"\\udc00",
    b"@NUL@": b"\\u0000",
    b'"@BIG@"': b"123456789012345678901234567890",
}
_messages = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.text(_ALPHABET, max_size=30)}
    ),
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": st.sampled_from(["@NAN@", "x@SURR@", "@NUL@", "@BIG@"])}
    ),
    st.integers(-3, 300),
    st.lists(st.text(_ALPHABET, max_size=4), max_size=3),
    st.fixed_dictionaries(
        {
            "role": st.just("user"),
            "content": st.lists(st.fixed_dictionaries({"text": st.text(_ALPHABET, max_size=8)}), max_size=2),
        }
    ),
)


def _dumped(record: dict, style: str) -> bytes:
    if style == "orjson":
        data = orjson.dumps(record)
    elif style == "spaced":
        data = json.dumps(record, separators=(", ", " : "), ensure_ascii=False).encode()
    else:
        data = json.dumps(record, ensure_ascii=True).encode()
    for token, value in _TOKENS.items():
        data = data.replace(token, value)
    return data


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["extend", "extend", "extend", "retry", "fork", "new", "grow_last"]),
            st.lists(_messages, min_size=1, max_size=3),
            st.sampled_from(["orjson", "orjson", "spaced", "ascii"]),
            st.sampled_from(["none", "none", "none", "truncate", "trailing_comma", "flip"]),
            st.integers(0, 2**16),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_random_conversations_parse_as_the_whole_parse_does(steps):
    conversations: list[list] = [[]]
    lines = []
    for move, new, style, damage, seed in steps:
        rnd = random.Random(seed)
        conv = rnd.choice(conversations)
        if move == "extend":
            conv = conv + new
        elif move == "fork":
            conv = conv[: rnd.randint(0, len(conv))] + new
        elif move == "new":
            conv = list(new)
        elif move == "grow_last" and conv and isinstance(conv[-1], dict):
            conv = [*conv[:-1], {**conv[-1], "content": f"{conv[-1]['content']}x"}]
        conversations.append(conv)
        line = _dumped({"request": {"messages": conv, "n": 1}, "metadata": {"call_id": f"c{len(lines)}"}}, style)
        if damage == "truncate":
            line = line[: rnd.randint(1, len(line))]
        elif damage == "trailing_comma":
            at = line.rfind(b"]")
            line = line[:at] + b"," + line[at:]
        elif damage == "flip":
            at = rnd.randrange(len(line))
            line = line[:at] + bytes([rnd.choice(b'",[]{}:\\ ')]) + line[at + 1 :]
        lines.append(line)
    original = message_prefix._MIN_BYTES
    message_prefix._MIN_BYTES = 0  # every array takes the shortcut's path, however small
    try:
        _assert_same(lines)
    finally:
        message_prefix._MIN_BYTES = original


def test_a_load_with_the_shortcut_equals_one_without(monkeypatch):
    lines = []
    for n in range(1, 12):
        conv = _conversation(n, FILL if n % 3 else ODD_TEXTS[n % len(ODD_TEXTS)] + FILL)
        lines.append(
            orjson.dumps(
                {
                    "prompt_token_ids": list(range(100 + n)),
                    "completion_token_ids": [1, 2],
                    "per_token_logps": [-0.5, -0.25],
                    "request": {"messages": conv},
                    "metadata": {"session_id": "s" if n % 4 else "t", "call_id": f"c{n}"},
                }
            )
        )
    data = b"\n".join(lines) + b"\n"
    fast = load_sources([Source.from_bytes("t.jsonl", data)])
    monkeypatch.setattr(MessageCutter, "cut", lambda self, *args: None)
    slow = load_sources([Source.from_bytes("t.jsonl", data)])
    assert_same_load(fast, slow)
    calls = fast.sessions["s"].calls
    assert calls[-1].request_messages[0] is calls[-2].request_messages[0]


def test_an_array_is_remembered_only_once_its_line_parsed():
    conv = _conversation(3)
    cutter = MessageCutter()
    items = _items(cutter, _record(conv))
    assert items is not None
    again = _items(cutter, _record([*conv, {"role": "user", "content": "x"}]))  # nothing kept: parsed whole
    assert again is not None and again[0] is not items[0]
    cutter.keep()
    third = _items(cutter, _record([*conv, {"role": "user", "content": "x"}, {"role": "user", "content": "y"}]))
    assert third is not None and third[0] is again[0]


def _items(cutter: MessageCutter, raw: bytes) -> list | None:
    """The values of the line's messages array the cutter took, or None."""
    found = cutter.cut(raw)
    return None if found is None else found[2]


def test_a_huge_array_is_left_to_the_validating_path(monkeypatch):
    monkeypatch.setattr(message_prefix, "_MAX_BYTES", 4096)
    cutter = MessageCutter()
    assert cutter.cut(_record(_conversation(1))) is not None
    assert cutter.cut(_record(_conversation(3))) is None


def test_the_shortcut_stops_trying_on_a_file_where_it_does_not_pay():
    fresh, growing = MessageCutter(), MessageCutter()
    for n in range(message_prefix._PROBE_LINES + 2):
        for cutter, conv in ((fresh, _conversation(2, f"{n} {FILL}")), (growing, _conversation(2 + n // 8))):
            if cutter.cut(_record(conv)) is not None:
                cutter.keep()
    assert fresh.off and not growing.off
    assert fresh.cut(_record(_conversation(2))) is None
    lines = [_record(_conversation(2, f"{n} {FILL}")) for n in range(message_prefix._PROBE_LINES + 4)]
    _assert_same(lines + [_record(_conversation(3))])
