"""The line-level shortcuts of the loader (graph/ingest/shortcuts/id_arrays.py, graph/ingest/values/line.py)
against the plain reading: each gives exactly what the JSON parser, or the code it replaced,
gives, on odd input as on plain input."""

from __future__ import annotations

import warnings
from unittest import mock

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.shortcuts import id_arrays
from rollout_graph.ingest.shortcuts.id_arrays import IdArrayCutter, _parse_plain
from rollout_graph.ingest.values import line as line_module
from rollout_graph.ingest.values.line import cut_line
from tests.support.builders import examples


def _json_ids(body: bytes) -> list[int] | None:
    try:
        value = orjson.loads(b"[" + body + b"]")
    except orjson.JSONDecodeError:
        return None
    return value if all(type(v) is int for v in value) else None


# --- the id text parse ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"1,,2", b"12,,,,3", b"1,2,,", b",,1", b"1,,01", b"5,,0,,7"],
)
def test_numpy_refuses_an_empty_element_of_compact_text(body):
    """_parse_plain leans on this for compact text (no search for ",,"): a numpy that read an
    empty element as a number would fail here first."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # numpy 1.x warns where numpy 2 raises
        with pytest.raises((ValueError, DeprecationWarning)):
            np.fromstring(body, dtype=np.int64, sep=",")
    assert _parse_plain(body) is None


# A token of a compact array body: a plain number, one with a leading zero, nothing (an empty
# element), a number too large for int64 or just below it, a stray character.
_token = st.one_of(
    st.integers(0, 200_000).map(lambda v: str(v).encode()),
    st.integers(0, 2**31).map(lambda v: str(v).encode()),
    st.integers(0, 999).map(lambda v: b"0" + str(v).encode()),
    st.just(b""),
    st.sampled_from([b"9" * 18, b"1" + b"0" * 18, b"9223372036854775807", b"9223372036854775808", b"9" * 25]),
    st.sampled_from([b"-1", b"1.0", b"1e3", b" 1", b"1 ", b"1 2", b"\t7", b"+1", b"0x1", b"\xff"]),
)


@settings(max_examples=examples(600), deadline=None)
@given(st.lists(_token, min_size=1, max_size=30), st.sampled_from([b",", b", ", b" ,"]))
def test_compact_and_spaced_bodies_parse_as_json_or_not_at_all(tokens, sep):
    body = sep.join(tokens)
    got = _parse_plain(body)
    expected = _json_ids(body)
    if got is None:
        return  # left to the validating path: always allowed
    arr, top = got
    assert expected is not None, body
    assert arr.tolist() == expected
    assert top == max(expected, default=0)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.integers(0, 10**17), min_size=1, max_size=200), st.sampled_from([",", ", ", ",\n"]))
def test_plain_bodies_take_the_fast_path(ids, sep):
    """Not vacuous: json.dumps' own output is read by numpy, never left to the parser."""
    body = sep.join(map(str, ids)).encode()
    got = _parse_plain(body)
    assert got is not None
    assert got[0].tolist() == ids and got[1] == max(ids)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_token, min_size=1, max_size=12))
def test_odd_tails_after_a_seen_prefix_parse_as_json_or_not_at_all(tokens):
    cutter = IdArrayCutter()
    prefix = b",".join(str(i).encode() for i in range(1000, 1100))
    assert cutter._ids(prefix) is not None
    body = prefix + b"," + b",".join(tokens)
    got = cutter._ids(body)
    expected = _json_ids(body)
    if got is not None:
        assert expected is not None and got.tolist() == expected


# --- the recent texts ------------------------------------------------------------------------


def _reference_seen_around(recent, text):
    """The scan _seen_around replaced: every recent text, in the order met."""
    best = longer = None
    size = len(text)
    for seen in recent:
        n = len(seen.text)
        if n <= size:
            if (best is None or n > len(best.text)) and text.startswith(seen.text) and text[n : n + 1] in (b"", b","):
                best = seen
        elif (
            longer is None
            and seen.slot is not None
            and seen.text[size : size + 1] == b","
            and seen.text.startswith(text)
        ):
            longer = seen
    return best, longer


_moves = st.lists(
    st.tuples(
        st.sampled_from(["extend", "extend", "repeat", "prefix", "prefix", "root", "fork", "digit"]),
        st.integers(0, 40),
        st.lists(st.integers(0, 300), min_size=0, max_size=80),
    ),
    min_size=1,
    max_size=40,
)


_STEM = list(range(1000, 1070))


@settings(max_examples=examples(300), deadline=None)
@given(_moves)
def test_the_recent_text_found_is_the_one_a_full_scan_finds(moves):
    """Longest first finds the same prefix (of equal ones, the one met first) and the same longer
    text as looking at every recent text in the order met; and the ids handed out are JSON's."""
    cutter = IdArrayCutter(arena_ids=4096)
    made: list[list[int]] = []
    for move, pick, ids in moves:
        earlier = made[-1 - pick % len(made)] if made else []
        if move == "extend":
            prompt = earlier + ids
        elif move == "repeat":
            prompt = list(earlier)
        elif move == "prefix":
            prompt = earlier[: max(0, len(earlier) - 1 - pick)]
        elif move == "fork":
            prompt = earlier[: len(earlier) // 2] + [301] + ids
        elif move == "digit" and earlier:  # its text opens with the earlier one's, mid-number
            prompt = earlier[:-1] + [int(f"{earlier[-1]}7")] + ids
        else:
            prompt = _STEM + ids  # more than the 64 ids below which nothing is remembered
        made.append(prompt)
        text = ",".join(map(str, prompt)).encode()
        want = _reference_seen_around(cutter._recent, text)
        got = cutter._seen_around(text)
        if want[0] is not None and len(want[0].text) == len(text):
            assert got[0] is want[0]  # the same text: its view, whatever is longer
        else:
            assert got[0] is want[0] and got[1] is want[1]
        assert sorted(map(id, cutter._by_length)) == sorted(map(id, cutter._recent))
        # longest first, of those as long the one met first (what insort by length kept)
        assert cutter._keys == [-len(seen.text) for seen in cutter._by_length]
        assert cutter._by_length == sorted(cutter._recent, key=lambda seen: -len(seen.text))
        arr = cutter._ids(text)
        assert arr is not None and arr.tolist() == prompt


def test_a_parent_read_after_its_child_counts_only_the_commas_after_a_seen_prefix(monkeypatch):
    """A prompt that both extends a seen one and opens a longer one: its view's length is the
    seen prefix's ids plus the commas after it (the whole text is not counted again)."""
    cutter = IdArrayCutter(arena_ids=4096)
    root = list(range(100, 200))
    child = root + list(range(500, 600))
    parent = root + list(range(500, 550))
    for prompt in (root, child):
        assert cutter._ids(",".join(map(str, prompt)).encode()) is not None
    view = cutter._ids(",".join(map(str, parent)).encode())
    assert view is not None and view.tolist() == parent and not view.flags.writeable
    assert id_arrays.held_bytes([view]) == len(parent) * 4


def test_cut_lines_give_the_same_ids_in_any_order():
    """Lines of one conversation read in any order (children before parents, repeats) through
    one cutter: each line's ids are JSON's."""
    rng = np.random.default_rng(5)
    prompts = [list(range(1000, 1100))]
    for _ in range(30):
        base = prompts[int(rng.integers(len(prompts)))]
        prompts.append(base + [int(v) for v in rng.integers(0, 50_000, int(rng.integers(0, 120)))])
    order = rng.permutation(len(prompts))
    cutter = IdArrayCutter(arena_ids=2048)
    for i in order:
        line = b'{"prompt_token_ids":[' + ",".join(map(str, prompts[i])).encode() + b'],"x":1}'
        cut, arrays = cut_line(line, cutter)
        (arr,) = arrays.values()
        assert arr.tolist() == prompts[i]


# --- searches for keys -----------------------------------------------------------------------


@settings(max_examples=examples(500), deadline=None)
@given(
    st.text(alphabet='ab_id"s\\.*[', max_size=60).map(str.encode),
    st.sampled_from([b'_ids"', b'_id"', b'"session_id"', b".*", b"[", b"\\", b"a"]),
    st.integers(0, 70),
    st.integers(0, 70),
)
def test_the_key_search_finds_what_bytes_find_finds(raw, key, pos, hi):
    """Keys holding regex syntax included: the compiled search is a literal one. With few first
    bytes looked at before it takes over, and many."""
    for tries in (0, 1, 2, id_arrays._TRIES, 100):
        with mock.patch.object(id_arrays, "_TRIES", tries):
            assert id_arrays._find(raw, key, pos, hi) == raw.find(key, pos, hi), tries


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(alphabet="0123456789, ", max_size=9000).map(str.encode),
    st.integers(0, 9000),
)
def test_the_comma_count_is_what_bytes_count_says(text, start):
    """Long texts are counted by numpy, short ones by bytes.count (the border included)."""
    start = min(start, len(text))
    assert id_arrays._commas(text, start) == text.count(b",", start)
    for n in (id_arrays._VECTOR_BYTES - 1, id_arrays._VECTOR_BYTES, id_arrays._VECTOR_BYTES + 1):
        long = (b"12," * n)[:n]
        assert id_arrays._commas(long, 0) == long.count(b",")
        assert id_arrays._commas(long, 1) == long.count(b",", 1)


def test_a_long_parent_read_after_its_child_is_a_view_of_as_many_ids():
    """Prompts long enough for the vectorised comma count, with and without a seen prefix."""
    cutter = IdArrayCutter()
    root = list(range(1000, 3000))  # over _VECTOR_BYTES of text
    child = root + list(range(7, 3007))
    parent = root + list(range(7, 1500))
    fresh = IdArrayCutter()
    for prompt in (child, parent, root):  # no seen prefix: the whole text is counted
        got = fresh._ids(",".join(map(str, prompt)).encode())
        assert got is not None and got.tolist() == prompt
    for prompt in (root, child, parent, root):  # a seen prefix: the commas after it
        got = cutter._ids(",".join(map(str, prompt)).encode())
        assert got is not None and got.tolist() == prompt


@settings(max_examples=examples(500), deadline=None)
@given(st.text(alphabet='prompt_oken"iu_ds:[ ', max_size=40).map(str.encode))
def test_the_id_keys_found_are_those_the_slice_comparison_found(raw):
    """The heads before ``_ids"`` checked by bytes.endswith, as by slices before (keys at the
    line's very start and lines shorter than a head included)."""

    def reference(raw: bytes) -> list[tuple[int, int]]:
        spans, at = [], raw.find(id_arrays.ID_KEY)
        while at >= 0:
            after = at + len(id_arrays.ID_KEY)
            if any(raw[at - len(head) : at] == head for head in id_arrays._HEADS):
                opening = id_arrays._OPENING.match(raw, after)
                if opening:
                    end = raw.find(b"]", opening.end())
                    if end < 0:
                        break
                    spans.append((opening.end(), end))
                    after = end
            at = raw.find(id_arrays.ID_KEY, after)
        return spans

    for line in (raw, raw + b'"prompt_token_ids":[1,2]', b'"input_ids":[3]' + raw, b'_ids":[1]' + raw):
        assert id_arrays._array_spans(line) == reference(line)


def _reference_duplicate_identity_key(raw: bytes) -> str | None:
    """The check before its searches were compiled (bytes.find and bytes.count)."""
    from rollout_graph.ingest.files.json_values import nesting as _scan
    from rollout_graph.ingest.values.line import _IDENTITY_KEYS, _KEY_AFTER

    _EARLY = 1024  # the bytes at each end of a line that version searched for each identity key
    ends = len(raw) - _EARLY
    met = sum(1 for key in _IDENTITY_KEYS if raw.find(key, 0, _EARLY) >= 0 or raw.find(key, max(0, ends)) >= 0)
    if raw.count(b'_id"') <= met:
        return None
    for key in _IDENTITY_KEYS:
        if raw.count(key) < 2:
            continue
        spots = []
        at = raw.find(key)
        while at >= 0:
            if _KEY_AFTER.match(raw, at + len(key)):
                spots.append(at)
            at = raw.find(key, at + 1)
        if len(spots) < 2:
            continue
        top = sum(1 for depth, opens in _scan(raw, spots)[1] if depth == 1 and opens)
        if top > 1:
            return key.decode().strip('"')
    return None


_piece = st.sampled_from(
    [
        b'"session_id":"a",',
        b'"session_id" : "b",',
        b'"call_id":"c",',
        b'"node_id":1,',
        b'"tool_call_id":"t",',
        b'"x":{"session_id":"n"},',
        b'"y":"\\"call_id\\":",',
        b'"z":"session_id\\"",',
        b'"prompt_token_ids":"m",',
        b'"session_id""call_id":',
        b'"pad":"' + b"p" * 700 + b'",',
        b'"w":["call_id",{"call_id":2}],',
    ]
)


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(_piece, max_size=14))
def test_the_duplicate_key_check_says_what_it_said_before(pieces):
    from rollout_graph.ingest.values.line import _duplicate_identity_key

    raw = b"{" + b"".join(pieces) + b'"end":0}'
    assert _duplicate_identity_key(raw) == _reference_duplicate_identity_key(raw)


def test_a_duplicate_identity_key_is_found_far_from_both_ends():
    from rollout_graph.ingest.values.line import _duplicate_identity_key

    pad = b'"pad":"' + b"p" * 5000 + b'",'
    raw = b'{"session_id":"a",' + pad + b'"session_id":"b",' + pad + b'"call_id":"c"}'
    assert _duplicate_identity_key(raw) == "session_id"
    assert _duplicate_identity_key(raw.replace(b'"session_id":"b",', b'"x":"b",')) is None


# --- the known messages span, handed on as it was asked for -----------------------------------


def _line_with_ids_around(messages: list, n: int, where: str) -> bytes:
    ids = list(range(100, 200 + n))
    record: dict = {}
    if where in ("before", "both"):
        record["prompt_token_ids"] = ids
    record["request"] = {"model": "m", "messages": messages}
    if where in ("after", "both"):
        record["input_ids"] = ids[::-1]
    record["metadata"] = {"session_id": "s", "call_id": f"c{n}"}
    return orjson.dumps(record)


def _cut_both_ways(steps: list[tuple[int, str]]) -> int:
    """Each line parsed with the messages shortcut (its known span handed on) and without; the
    lines' values agree, and the span handed to the logprob skim's check is the one the searches
    asked for, on the original line (every span is found there: none is moved by another's cut).
    How many spans were handed on."""
    from rollout_graph.ingest.limits import Limits
    from rollout_graph.ingest.shortcuts.messages import KnownSpan, MessageCutter
    from tests.support.builders import _same_value

    handed: list[tuple[bytes, tuple[int, int]]] = []
    asked: list[tuple[int, int]] = []
    real_holds, real_ask = line_module.holds_alternatives, KnownSpan.ask

    def spy(raw, cut, span):
        if span is not None:
            handed.append((raw, span))
        return real_holds(raw, cut, span)

    def ask(self, raw, pos, end=None):
        span = real_ask(self, raw, pos, end)
        if span is not None:
            asked.append(span)
        return span

    fill = "lorem ipsum " * 200
    messages: list = []
    fast, plain, cutter_messages = IdArrayCutter(), IdArrayCutter(), MessageCutter()
    taken = 0
    with pytest.MonkeyPatch.context() as m:
        m.setattr(line_module, "holds_alternatives", spy)
        m.setattr(KnownSpan, "ask", ask)
        for n, (grow, where) in enumerate(steps):
            messages = messages + [{"role": "user", "content": f"{len(messages)} {fill}"} for _ in range(grow)]
            line = _line_with_ids_around(messages, n, where)
            handed.clear()
            asked.clear()
            got = line_module.parse_line(n + 1, line, fast, Limits(), messages=cutter_messages)
            for raw, span in handed:
                assert raw is line and {span} == set(asked)
                assert line[span[0] - 1 : span[0]] == b"["  # a messages array's body, in the line as read
            taken += len(handed)
            want = line_module.parse_line(n + 1, line, plain, Limits())
            assert got.error is None and want.error is None
            _same_value(want.value, got.value, f"line {n + 1}")
    return taken


def test_the_known_span_is_handed_on_as_found_in_the_line():
    steps = [(2, "before"), (1, "before"), (1, "both"), (2, "after"), (1, "both"), (1, "before")]
    assert _cut_both_ways(steps) >= 3


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["before", "after", "both"])), min_size=2, max_size=8))
def test_the_known_span_handed_on_is_the_one_asked_for(steps):
    _cut_both_ways(steps)
