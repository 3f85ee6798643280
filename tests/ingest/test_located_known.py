"""The byte search for a choice's content array (logprob_spans.located_span) skips the repeated
``messages`` span the messages cutter knows (MessageCutter.known): an opening found there would
not be a choice's. The loads must be exactly those of the validating path (the skim, no located
cut) also when a message holds the very bytes the search looks for, and the skip must be taken."""

from __future__ import annotations

import json
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.ingest.files.sources import Source
from rollout_graph.ingest.load.calls import load_sources
from rollout_graph.ingest.shortcuts import logprob_spans
from rollout_graph.ingest.values import line as line_module
from tests.support.builders import Turn, assert_same_load, examples, vllm_chat

FILL = "lorem ipsum " * 300  # a messages array over the messages shortcut's minimum

# a message holding the bytes of a choice's content opening, and its close, as keys
ECHO = {
    "role": "assistant",
    "content": FILL,
    "logprobs": {"content": [{"token": "token_id:9", "logprob": -1}] * 3},
    "finish_reason": "stop",
}


def _lines(echo_first: bool) -> list[bytes]:
    messages: list[dict] = [{"role": "system", "content": FILL}]
    if echo_first:
        messages.append(ECHO)
    lines = []
    for i in range(4):
        messages = [*messages, {"role": "user", "content": f"step {i} " + FILL}]
        sampled = list(range(50 + i, 150 + i))
        turn = Turn(f"c{i}", list(range(1000, 1400 + 10 * i)), sampled, messages=list(messages))
        lines.append(json.dumps(vllm_chat(turn), separators=(",", ":")).encode())
        if not echo_first and i == 0:
            messages.append(ECHO)
    return lines


def _load(path, **patches):
    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0):
        if not patches:
            return load_sources([Source.from_path(path)])
        with (
            mock.patch.object(line_module, "holds_alternatives", lambda *a: False),
            mock.patch.object(line_module, "located_span", lambda raw, *_: None),
        ):
            return load_sources([Source.from_path(path)])


def test_a_content_opening_inside_the_known_messages_is_skipped(tmp_path):
    for echo_first in (True, False):
        path = tmp_path / f"t{echo_first}.jsonl"
        path.write_bytes(b"\n".join(_lines(echo_first)) + b"\n")
        found: list[tuple[int, int] | None] = []
        skipped: list[tuple[int, int] | None] = []
        real = logprob_spans.located_span

        def spying(raw, skip=None, real=real, found=found, skipped=skipped):
            def asked(skip=skip, skipped=skipped):
                span = skip()
                skipped.append(span)
                return span

            span = real(raw, None if skip is None else asked)
            found.append(None if span is None else (raw.find(b'"response":{') < span[0]))
            return span

        with mock.patch.object(line_module, "located_span", spying):
            fast = _load(path)
        slow = _load(path, skim=True)
        assert fast.loaded == slow.loaded == 4
        assert_same_load(fast, slow)
        assert any(s is not None for s in skipped), "the known span was never handed to the search"
        # a line whose echo is not yet inside a known span (the first line; the second when the
        # echo comes after its first messages) meets the echo (the skim then cuts it); once the
        # known span holds the echo the spans found are the response's
        assert found == ([False, True, True, True] if echo_first else [True, False, True, True])


def test_without_the_skip_the_opening_in_the_messages_is_found_first(tmp_path):
    """The case the skip changes: the plain search meets the message's opening first (the skim
    then cuts the line); with the skip the line takes the located cut; both load the same."""
    line = _lines(True)[1]
    plain = logprob_spans.located_span(line)
    assert plain is not None and plain[0] < line.find(b'"response":{')
    messages_at = line.find(b'"messages":[') + len(b'"messages":[')
    span = logprob_spans.located_span(line, lambda: (messages_at, line.find(b'"response":{')))
    assert span is not None and span[0] > line.find(b'"response":{')


_PIECES = ['"logprobs":{"content":[', '"content":[', "[", "s", '"', ":", "{", "x[", '"logprobs":{"content":']


@settings(max_examples=examples(600), deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), max_size=30).map(lambda p: "".join(p).encode()),
    st.integers(0, 400),
    st.integers(0, 400),
    st.sampled_from([0, 1, 2, 16]),
)
def test_the_bracket_key_search_finds_what_bytes_find_finds(raw, start, end, tries):
    """Keys met after many brackets (bytes.find takes over), overlapping, cut by either bound."""
    key = logprob_spans._CONTENT_OPENS
    with mock.patch.object(logprob_spans, "_TRIES", tries):
        assert logprob_spans.find_bracket_key(raw, key, start, end) == raw.find(key, start, end)
        assert logprob_spans.find_bracket_key(raw, b"[", start, end) == raw.find(b"[", start, end)
        assert logprob_spans.find_bracket_key(raw, b'":[', start, end) == raw.find(b'":[', start, end)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.sampled_from([*_PIECES, ']},"finish_reason"', "y" * 40]), max_size=40).map(
        lambda p: ('{"request":{' + "".join(p)).encode()
    ),
    st.integers(0, 300),
    st.integers(0, 300),
)
def test_the_located_span_is_the_one_bytes_find_gives(raw, a, b):
    """With and without a skipped span: the opening is the first bytes.find finds outside it."""

    def reference(skip):
        key = logprob_spans._CONTENT_OPENS
        if skip is None:
            at = raw.find(key)
        else:
            at = raw.find(key, 0, skip[0] + len(key) - 1)
            at = at if at >= 0 else raw.find(key, max(0, skip[1] - len(key) + 1))
        if at < 0:
            return None
        start = at + len(key) - 1
        end = raw.rfind(logprob_spans._CONTENT_CLOSES, start)
        return None if end < 0 or end + 1 - start < logprob_spans.MIN_CUT_BYTES else (start, end + 1)

    skip = (min(a, b), max(a, b))
    with mock.patch.object(logprob_spans, "MIN_CUT_BYTES", 0), mock.patch.object(logprob_spans, "_TRIES", 2):
        assert logprob_spans.located_span(raw) == reference(None)
        assert logprob_spans.located_span(raw, lambda: skip) == reference(skip)
        assert logprob_spans.located_span(raw, lambda: None) == reference(None)
