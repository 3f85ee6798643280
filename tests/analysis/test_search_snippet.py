"""Search-hit snippets: cut at a word's edge near ``SNIPPET`` characters either side of the match
(never "…he test" for a cut inside "the"), the match itself always whole, and a word reaching more
than half the margin past the cut (a path, a hash) cut where it falls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.decode import TraceTextDecoder, trace_token_texts
from rollout_graph.analysis.search import SNIPPET, Query, SearchIndex, search, snippet
from tests.support.builders import Turn, rollout_of, vllm_chat

TEXT = (
    "Running the full suite now. The test collection found 42 items and then the test in "
    "tests/test_config.py failed with a KeyError because the configuration file lacks the key named port."
)


def old_snippet(text: str, start: int, end: int, width: int = SNIPPET) -> str:
    """The snippet as it was cut before (``width`` characters either side, wherever they fall)."""
    lo, hi = max(0, start - width), min(len(text), end + width)
    return ("…" if lo > 0 else "") + " ".join(text[lo:hi].split()) + ("…" if hi < len(text) else "")


def words_of(shown: str) -> list[str]:
    return shown.strip("…").split()


def test_a_cut_inside_a_word_moves_to_the_word_edges():
    start = TEXT.index("KeyError")
    end = start + len("KeyError")
    before = old_snippet(TEXT, start, end)
    assert not set(words_of(before)[:1] + words_of(before)[-1:]) <= set(TEXT.split())  # the old cut: mid-word
    shown = snippet(TEXT, start, end)
    assert shown == "…in tests/test_config.py failed with a KeyError because the configuration file lacks…"
    assert set(words_of(shown)) <= set(TEXT.split())  # whole words only, at both ends


def test_the_start_and_end_of_the_text_are_not_cut():
    assert snippet("the test failed", 4, 8) == "the test failed"
    assert snippet(TEXT, 0, 7).startswith("Running the full suite") and snippet(TEXT, 0, 7).endswith("…")


def test_a_word_longer_than_the_margin_is_cut_where_it_falls():
    text = "x" * 100 + " needle " + "y" * 100
    start = text.index("needle")
    assert snippet(text, start, start + 6) == old_snippet(text, start, start + 6)


def test_a_match_that_starts_inside_a_word_stays_whole():
    # "he test" matches inside "the test": the snippet keeps all of the match, and cuts only outside it
    text = "a" * 30 + " the test failed"
    start = text.index("he test")
    shown = snippet(text, start, start + len("he test"))
    assert "he test" in shown and shown.endswith("failed")


def test_a_search_hit_snippet_starts_at_a_word():
    long = "The configuration loader read the file and then the test in tests/test_config.py failed at once."
    rollout = rollout_of([vllm_chat(Turn("c1", [1, 2, 3], [4], messages=[{"role": "tool", "content": long}]))])
    hits = search(SearchIndex(rollout, TraceTextDecoder(trace_token_texts(rollout.calls))), Query.compile("failed"))
    assert hits and all(set(words_of(h.snippet)) <= set(long.split()) for h in hits)
    assert hits[0].snippet.startswith("…then the test")


WORDS = st.lists(st.text(st.sampled_from("abcdé<>0123456789_."), min_size=1, max_size=15), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(WORDS, st.data())
def test_whole_words_either_side_and_the_match_whole(words, data):
    """Words joined by single spaces, a match of whole words: the snippet is a run of whole words of
    the text holding the match, no longer than the old cut, and ``…`` exactly where it stops short."""
    first = data.draw(st.integers(0, len(words) - 1))
    last = data.draw(st.integers(first, len(words) - 1))
    text = " ".join(words)
    start = len(" ".join(words[:first])) + (1 if first else 0)
    end = start + len(" ".join(words[first : last + 1]))
    shown = snippet(text, start, end)
    match = " ".join(words[first : last + 1])
    assert match in shown
    assert len(shown) <= len(old_snippet(text, start, end))
    assert shown.startswith("…") == (start > SNIPPET) and shown.endswith("…") == (end + SNIPPET < len(text))
    inner = words_of(shown)
    for k in range(len(words)):
        if words[k : k + len(inner)] == inner:
            break
    else:  # not a run of whole words: only when a margin held no space to move to
        lo, hi = max(0, start - SNIPPET), min(len(text), end + SNIPPET)
        reach = SNIPPET // 2
        assert " " not in text[lo : min(start, lo + reach)] or " " not in text[max(end, hi - 1 - reach) : hi]


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("ab \n\t.é"), max_size=200), st.data())
def test_any_text_keeps_the_match_and_only_moves_cuts_outward_to_spaces(text, data):
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    shown = snippet(text, start, end)
    assert " ".join(text[start:end].split()) in shown
    assert shown.startswith("…") == (start > SNIPPET) and shown.endswith("…") == (end + SNIPPET < len(text))
    assert len(shown) <= len(old_snippet(text, start, end))
    assert "\n" not in shown and "\t" not in shown  # one line
