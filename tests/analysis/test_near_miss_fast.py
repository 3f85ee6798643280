"""The near-miss pass's shortcuts (graph/analysis/near_miss/) against the plain computations.

The system-text comparison (``_similar``) keeps each text's word 3-grams packed into integers,
computed once per text for a whole pass: every decision must be the one the plain sets of word
tuples give (tests/support/reference.py), on random texts near the threshold, around the 20-word and the
truncation boundaries, with odd whitespace, and with one cache shared by many comparisons while its
word numbering starts over and its arrays are dropped. The identical-prompt groups
(``_prompt_groups``) add only the calls that can be a twin: the near misses must be the ones every
call added gives, on random traces full of retries and identical prompts."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss import search
from rollout_graph.analysis.near_miss import texts as near_miss_texts
from rollout_graph.analysis.near_miss.ids import _SamePrompt
from rollout_graph.analysis.near_miss.texts import SIMILAR_SYSTEM, SYSTEM_COMPARED, _similar, _SystemGrams
from tests.support.builders import examples, harness_traces, rollout_of_tokens
from tests.support.reference import reference_similar

WORDS = ["the", "agent", "ran", "ls", "main.py", "fixed", "test", "a", "b", "é", "日本", "x\u00a0y", "tab\tbed"]
WORDS += ["\ud83d"]  # a lone surrogate: raw surrogates reach system texts
SPACES = [" ", "  ", "\n", "\t", "\u00a0", "\u2003", "\x1c", "\r\n", "\u3000"]
CHECKED = settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def texts(draw, pool=WORDS):
    n = draw(st.integers(0, 60))
    words = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    seps = draw(st.lists(st.sampled_from(SPACES), min_size=n, max_size=n))
    return "".join(w + s for w, s in zip(words, seps, strict=True))


@st.composite
def edited(draw, text):
    """``text`` with a few words changed, inserted or dropped: the pairs that sit near the threshold."""
    words = text.split()
    for _ in range(draw(st.integers(0, 12))):
        at = draw(st.integers(0, len(words)))
        op = draw(st.sampled_from(["change", "insert", "drop"]))
        if op == "insert" or not words:
            words.insert(at, draw(st.sampled_from(WORDS)))
        elif op == "drop":
            words.pop(min(at, len(words) - 1))
        else:
            words[min(at, len(words) - 1)] = draw(st.sampled_from(WORDS))
    return draw(st.sampled_from(SPACES)).join(words)


@CHECKED
@given(texts(), st.data())
def test_packed_comparison_decides_as_the_tuple_sets(a, data):
    b = data.draw(st.one_of(texts(), edited(a)))
    assume(a != b)  # equal texts return before any 3-gram is built
    assert _similar(a, b) == reference_similar(a, b, SIMILAR_SYSTEM, SYSTEM_COMPARED)
    assert _similar(b, a) == reference_similar(b, a, SIMILAR_SYSTEM, SYSTEM_COMPARED)


@CHECKED
@given(st.integers(1, 200), st.integers(0, 40), st.data())
def test_packed_comparison_cuts_where_the_sets_cut(width, tail, data):
    """Texts longer than SYSTEM_COMPARED characters: only the head is compared, a word cut in two."""
    head = data.draw(texts())
    assume(len(head.split()) >= 3)
    a = (head * (SYSTEM_COMPARED // max(1, len(head)) + 2))[: SYSTEM_COMPARED - width] + "word" * width
    b = a[: SYSTEM_COMPARED - tail] + data.draw(texts())
    assume(a != b)
    assert _similar(a, b) == reference_similar(a, b, SIMILAR_SYSTEM, SYSTEM_COMPARED)


def test_one_cache_for_many_comparisons_decides_as_the_tuple_sets(monkeypatch):
    """A pass keeps one cache: the word numbering starting over (a small WORDS here) and the kept
    arrays being dropped (a small KEPT_BYTES) change no decision; both decisions occur."""
    monkeypatch.setattr(_SystemGrams, "FIRST_WORDS", 40)
    monkeypatch.setattr(_SystemGrams, "WORDS", 256)  # two texts of 120 words fit
    monkeypatch.setattr(_SystemGrams, "KEPT_BYTES", 4096)
    rng = random.Random(24)
    vocabulary = [f"w{i}" for i in range(300)] + WORDS
    bases, variants = [], []
    for _ in range(30):
        pool = rng.sample(vocabulary, 25)
        base = " ".join(rng.choices(pool, k=rng.randint(15, 120)))
        bases.append(base)
        words = base.split()
        for _ in range(rng.randint(0, len(words) // 3)):
            words[rng.randrange(len(words))] = rng.choice(pool)
        variants.append(" ".join(words))
    texts_ = bases + variants
    grams = _SystemGrams()
    outcomes = set()
    for _ in range(3000):
        a, b = rng.choice(texts_), rng.choice(texts_)
        expected = reference_similar(a, b, SIMILAR_SYSTEM, SYSTEM_COMPARED)
        assert _similar(a, b, grams) == expected, (a, b)
        outcomes.add(expected)
    assert outcomes == {True, False}
    assert grams.generation > 0  # the numbering did start over


def test_the_module_keeps_the_threshold_the_docs_state():
    assert near_miss_texts.SIMILAR_SYSTEM == 0.5 and near_miss_texts.SYSTEM_COMPARED == 4000


def _every_call_grouped(calls, parents, explained, n_prompts=None):
    """The groups as they were built before the shortcut: every call with a prompt added to both."""
    same, siblings = _SamePrompt(calls), None
    for i, c in enumerate(calls):
        if c.prompt_ids is not None and c.n_prompt:
            same.add(i)
    siblings = _SamePrompt(calls, scope=parents, prints=same.prints)
    for i, c in enumerate(calls):
        if c.prompt_ids is not None and c.n_prompt:
            siblings.add(i)
    return same, siblings


@CHECKED
@given(harness_traces(max_calls=24))
def test_twin_groups_of_possible_twins_find_what_every_call_grouped_finds(spec):
    fast = rollout_of_tokens(spec).near_misses
    assume(fast)
    original = search._prompt_groups
    search._prompt_groups = _every_call_grouped
    try:
        plain = rollout_of_tokens(spec).near_misses
    finally:
        search._prompt_groups = original
    assert fast == plain
