"""The search index's own memory and its byte budget (graph/analysis/search.py): every search gives
the hits of a naive search (tests/support/reference.py) on every input under the budget, the ASCII
``ignore_case`` shortcut included (non-ASCII text and case pairs such as the Kelvin sign take the
pattern); over the budget each place covers the first calls that fit, the hits are the naive hits of
those calls and ``partial_note`` says what was not searched; a span that cannot fit is never decoded."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.decode import TraceTextDecoder
from rollout_graph.analysis.search import (
    CONTEXT,
    DEFAULT_MAX_BYTES,
    ENV_MAX,
    MESSAGE,
    RESPONSE,
    SAMPLED,
    WHERES,
    Query,
    SearchError,
    SearchIndex,
    max_bytes_from_env,
    search,
)
from rollout_graph.core.records import Call, SessionInput
from rollout_graph.pipeline import analyse
from tests.support.reference import reference_search

# ASCII letters beside the characters that fold to them under re.IGNORECASE (Kelvin sign, long s,
# dotted and dotless i), other cased letters, spaces and newlines
ALPHABET = "aAkKsSiI \n\u212a\u017f\u0130\u0131\u00df\u00e9\u00c9x-<>0"
TEXT = st.text(alphabet=ALPHABET, max_size=40)
ROLES = st.sampled_from(["system", "user", "assistant", "tool"])
PLAIN = st.builds(lambda role, content: {"role": role, "content": content}, ROLES, TEXT)
PARTS = st.builds(
    lambda role, texts: {"role": role, "content": [{"type": "text", "text": t} for t in texts]},
    ROLES,
    st.lists(TEXT, min_size=1, max_size=3),
)
TOOL_CALL = st.builds(
    lambda name, arguments: {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": name, "arguments": arguments}}],
    },
    TEXT,
    TEXT,
)
MESSAGE_VALUE = st.one_of(PLAIN, PARTS, TOOL_CALL)
IDS = st.lists(st.integers(0, 12), max_size=12)
PIECE = st.one_of(TEXT, st.just("x" * 300))  # a piece longer than 255 characters widens the lengths
REGEXES = ["a+", "(?<=a)", "^k", "s$", "[kK]", r"\w", "i|\u0130", r"\s", "<1"]


@st.composite
def rollouts(draw):
    history = draw(st.lists(MESSAGE_VALUE, min_size=1, max_size=6))
    calls = []
    prompt: list[int] = []
    for i in range(draw(st.integers(1, 6))):
        # most calls extend the conversation and the token prompt (shared texts, context spans)
        if draw(st.booleans()):
            prompt = prompt + draw(IDS)
        else:
            prompt = draw(IDS)
        sampled = draw(IDS)
        call = Call(
            node_id=f"c{i}",
            session_id="s",
            source="mem",
            line=i + 1,
            shape="test",
            prompt_ids=np.array(prompt, dtype=np.int32),
            sampled_ids=np.array(sampled, dtype=np.int32),
            sampled_logprobs=np.full(len(sampled), -0.5),
        )
        cut = draw(st.integers(1, len(history)))
        call.request_messages = history[:cut] + draw(st.lists(MESSAGE_VALUE, max_size=2))
        call.response_message = draw(st.one_of(st.none(), PLAIN, TOOL_CALL))
        calls.append(call)
        prompt = prompt + sampled
    rollout = analyse(SessionInput("s", calls))
    known = draw(st.dictionaries(st.integers(0, 12), PIECE, max_size=10))
    return rollout, TraceTextDecoder(known)


QUERIES = st.one_of(
    st.tuples(st.text(alphabet=ALPHABET, min_size=1, max_size=3), st.just(False), st.booleans()),
    st.tuples(st.sampled_from(REGEXES), st.just(True), st.booleans()),
)


def _query(text: str, regex: bool, ignore_case: bool) -> Query | None:
    try:
        return Query.compile(text, regex=regex, ignore_case=ignore_case)
    except SearchError:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollouts(), QUERIES)
def test_every_search_under_the_budget_gives_the_naive_hits(built, q):
    rollout, decoder = built
    text, regex, ignore_case = q
    query = _query(text, regex, ignore_case)
    assume(query is not None)
    index = SearchIndex(rollout, decoder)
    assert [h.as_dict() for h in search(index, query)] == reference_search(rollout, decoder, text, regex, ignore_case)
    assert index.partial_note() is None and index.nbytes <= index.max_bytes
    # a second search reads the same index (built once)
    assert [h.as_dict() for h in search(index, query)] == reference_search(rollout, decoder, text, regex, ignore_case)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rollouts(), QUERIES, st.integers(0, 6000))
def test_over_the_budget_the_first_calls_that_fit_are_searched_and_the_note_says_so(built, q, budget):
    rollout, decoder = built
    text, regex, ignore_case = q
    query = _query(text, regex, ignore_case)
    assume(query is not None)
    index = SearchIndex(rollout, decoder, max_bytes=budget)
    index.prepare()
    assert index.nbytes <= budget
    got = [h.as_dict() for h in search(index, query)]
    covered = index.covered
    naive = reference_search(rollout, decoder, text, regex, ignore_case)
    assert got == [h for h in naive if h["index"] < covered[h["where"]]]
    n = len(rollout.calls)
    note = index.partial_note()
    assert (note is None) == all(covered[w] == n for w in WHERES)
    if note is not None:
        assert note.startswith("Not searched: the ") and ENV_MAX in note
        for where in WHERES:
            k = covered[where]
            if k < n:
                assert ("every call" if k == 0 else f"#{k:,}") in note


@pytest.mark.parametrize(
    ("text", "haystack"),
    [("k", "\u212a"), ("s", "\u017f"), ("i", "\u0130"), ("ss", "\u00df"), ("K", "xk"), ("é", "É"), ("a", "A\u212a")],
)
def test_ignore_case_matches_what_the_pattern_matches(text, haystack):
    import re

    query = Query.compile(text, ignore_case=True)
    pattern = re.compile(re.escape(text), re.IGNORECASE)
    found = pattern.search(haystack)
    assert query.first(haystack) == (None if found is None else found.span())
    assert query.count(haystack) == len(pattern.findall(haystack))
    assert list(query.matches(haystack)) == [m.span() for m in pattern.finditer(haystack)]


def _big_rollout(n_calls: int, n_tokens: int):
    calls = []
    for i in range(n_calls):
        sampled = np.arange(n_tokens, dtype=np.int32) % 50
        call = Call(f"c{i}", "s", "mem", i + 1, "test", np.zeros(0, dtype=np.int32), sampled, np.full(n_tokens, -0.5))
        call.request_messages = [{"role": "user", "content": f"message {i} " + "word " * 200}]
        call.response_message = {"role": "assistant", "content": f"reply {i}", "refusal": None}
        calls.append(call)
    return analyse(SessionInput("s", calls))


class _Counting(TraceTextDecoder):
    def __init__(self, known):
        super().__init__(known)
        self.decoded = 0

    def pieces(self, ids):
        self.decoded += len(ids)
        return super().pieces(ids)


def test_a_span_that_cannot_fit_is_not_decoded_and_the_note_names_the_place():
    rollout = _big_rollout(20, 2000)
    decoder = _Counting({k: "t" for k in range(50)})
    index = SearchIndex(rollout, decoder, max_bytes=60_000)
    hits = search(index, Query.compile("t"))
    covered = index.covered
    assert covered[MESSAGE] == covered[RESPONSE] == 20  # the texts are the messages' own: only slots cost
    assert 0 < covered[SAMPLED] < 20 and covered[CONTEXT] == 20  # the context spans are empty here
    assert decoder.decoded <= (covered[SAMPLED] + 1) * 2000  # one span decoded past the budget at most
    assert {h.index for h in hits if h.where == SAMPLED} == set(range(covered[SAMPLED]))
    note = index.partial_note()
    assert note == (
        f"Not searched: the decoded sampled spans of calls #{covered[SAMPLED]:,} to #19 (the search index"
        f" holds at most 60,000 bytes per rollout: {ENV_MAX})."
    )
    assert index.partial_note((MESSAGE, RESPONSE)) is None  # a search of those places saw every call


def test_lengths_are_one_byte_a_token_and_the_budget_counts_what_the_index_keeps():
    rollout = _big_rollout(10, 1000)
    index = SearchIndex(rollout, TraceTextDecoder({k: "tok" for k in range(50)}))
    index.prepare()
    (text, lengths), *_ = index.span(SAMPLED)
    assert lengths.dtype == np.uint8 and int(lengths.sum()) == len(text) == 3000
    # the texts and lengths it made, not the messages it shares with the rollout
    kept = sum(len(t) + len(lengths) for t, lengths in index.span(SAMPLED))
    assert kept <= index.nbytes < kept + 10 * 800  # and a few hundred bytes a call of objects and slots


def test_the_budget_from_the_environment(monkeypatch):
    monkeypatch.delenv(ENV_MAX, raising=False)
    assert max_bytes_from_env() == DEFAULT_MAX_BYTES
    for raw, value in (
        ("1000", 1000),
        ("64M", 64 << 20),
        ("2g", 2 << 30),
        ("12k", 12 << 10),
        ("lots", DEFAULT_MAX_BYTES),
    ):
        monkeypatch.setenv(ENV_MAX, raw)
        assert max_bytes_from_env() == value
    monkeypatch.setenv(ENV_MAX, "0")
    rollout = _big_rollout(2, 10)
    index = SearchIndex(rollout, TraceTextDecoder({}))
    assert search(index, Query.compile("message")) == []
    assert index.partial_note() == (
        "Not searched: the request messages, responses, decoded sampled spans and decoded context spans of every"
        f" call (the search index holds at most 0 bytes per rollout: {ENV_MAX})."
    )


def test_the_command_says_which_calls_it_did_not_search(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from tests.analysis.test_search import records
    from tests.support.builders import write

    trace = str(write(tmp_path / "trace.jsonl", records()))
    env = {**os.environ, ENV_MAX: "700", "ROLLOUT_GRAPH_CACHE": "off"}
    out = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "search", "a", trace, "--json"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    assert "rollout-graph search: session s1: Not searched: the " in out.stderr and ENV_MAX in out.stderr
    assert "Traceback" not in out.stderr
    json.loads(out.stdout)  # the hits of what was searched, still one JSON document
    env.pop(ENV_MAX)
    full = subprocess.run(
        [sys.executable, "-m", "rollout_graph", "search", "a", trace, "--json"], capture_output=True, text=True, env=env
    )
    assert full.stderr == "" and len(json.loads(full.stdout)["hits"]) > len(json.loads(out.stdout)["hits"])
