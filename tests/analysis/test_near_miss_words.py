"""The system texts' words read with numpy (``_AsciiWords`` in graph/analysis/near_miss/texts.py) against
``str.split``: an ASCII text's words must be exactly the ones ``str.split()`` gives, in order, and
two words (of one text or of two) must get one number exactly when they are equal, on random
ASCII texts with every whitespace ``str.split`` knows (the \\x1c-\\x1f separators too), control
characters that are not whitespace, and words on both sides of the 8-byte boundary where a word
stops being read as one integer. A text with a NUL is left to ``str.split``. And the 3-gram
decision of two texts, one read each way, is the one of the plain word-tuple sets."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss.texts import (
    SIMILAR_SYSTEM,
    SYSTEM_COMPARED,
    _AsciiWords,
    _Numbers,
    _similar,
    _SystemGrams,
)
from tests.support.builders import examples
from tests.support.reference import reference_similar

CHECKED = settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ASCII whitespace as str.split() knows it, and characters it does not split on
BLANKS = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "  ", "\r\n", " \x1f "]
LETTERS = "ab8\x01\x7f\x1b~"  # control characters that are not whitespace are word characters
_word = st.text(st.sampled_from(LETTERS), min_size=1, max_size=12)  # 1-12 bytes: both sides of 8
_pool = ["a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "abcdefgh8", "8abcdefgh", "\x7f", "~~~~~~~~", "~~~~~~~~~"]
_words = st.one_of(_word, st.sampled_from(_pool))


@st.composite
def ascii_texts(draw, min_words=0, max_words=40):
    n = draw(st.integers(min_words, max_words))
    words = draw(st.lists(_words, min_size=n, max_size=n))
    blanks = draw(st.lists(st.sampled_from(BLANKS), min_size=n + 1, max_size=n + 1))
    return blanks[0] + "".join(w + b for w, b in zip(words, blanks[1:], strict=True))


def _same_partition(ids: list[int], words: list[str]) -> None:
    """Equal numbers exactly where the words are equal."""
    for i in range(len(words)):
        for j in range(i + 1, len(words)):
            assert (ids[i] == ids[j]) == (words[i] == words[j]), (words[i], words[j])


@CHECKED
@given(ascii_texts())
def test_the_words_are_the_ones_str_split_gives(text):
    found = _AsciiWords.of(text)
    assert found is not None
    words = text.split()
    assert len(found) == len(words)
    assert [text[s:e] for s, e in zip(found.starts.tolist(), found.ends.tolist(), strict=True)] == words
    _same_partition(found.numbers(_Numbers()).tolist(), words)


@CHECKED
@given(ascii_texts(), ascii_texts())
def test_two_texts_numbered_together_share_numbers_exactly_for_equal_words(a, b):
    number = _Numbers()
    ids_a = _AsciiWords.of(a).numbers(number).tolist()  # type: ignore[union-attr]
    ids_b = _AsciiWords.of(b).numbers(number).tolist()  # type: ignore[union-attr]
    _same_partition(ids_a + ids_b, a.split() + b.split())
    assert sorted(number) == sorted(set(a.split() + b.split()))  # every word numbered by its text
    assert set(ids_a + ids_b) == set(range(len(number)))


@CHECKED
@given(ascii_texts(), st.lists(_words, min_size=1, max_size=6))
def test_a_word_numbered_by_str_split_first_keeps_its_number(text, words):
    """The two readings share one numbering: a word numbered from a text that was not ASCII (read
    with str.split) has the same number when an ASCII text holds it."""
    number = _Numbers()
    before = {w: number[w] for w in words}
    ids = _AsciiWords.of(text).numbers(number).tolist()  # type: ignore[union-attr]
    for w, i in zip(text.split(), ids, strict=True):
        assert number[w] == i
        if w in before:
            assert before[w] == i


def test_a_text_with_a_nul_is_left_to_str_split():
    assert _AsciiWords.of("a b\x00c d") is None
    assert _AsciiWords.of("") is not None and len(_AsciiWords.of("")) == 0  # type: ignore[arg-type]


@st.composite
def pairs(draw):
    """Two texts of 20+ words sharing many 3-grams (one edited from the other), one of them
    sometimes made non-ASCII (read with str.split) or given a NUL."""
    a = draw(ascii_texts(min_words=18, max_words=60))
    words = a.split()
    for _ in range(draw(st.integers(0, 10))):
        at = draw(st.integers(0, max(0, len(words) - 1)))
        op = draw(st.sampled_from(["change", "insert", "drop"]))
        if op == "insert" or not words:
            words.insert(at, draw(_words))
        elif op == "drop":
            words.pop(at)
        else:
            words[at] = draw(_words)
    b = draw(st.sampled_from(BLANKS)).join(words)
    b = draw(st.sampled_from(["", "é ", "\x00 ", "日本 "])) + b
    return (a, b) if draw(st.booleans()) else (b, a)


@CHECKED
@given(pairs())
def test_the_decision_is_the_one_of_the_word_tuple_sets(pair):
    a, b = pair
    assume(a != b)
    expected = reference_similar(a, b, SIMILAR_SYSTEM, SYSTEM_COMPARED)
    assert _similar(a, b) == expected
    grams = _SystemGrams()  # one cache for both orders, as a pass keeps it
    assert _similar(a, b, grams) == expected
    assert _similar(b, a, grams) == reference_similar(b, a, SIMILAR_SYSTEM, SYSTEM_COMPARED)


def test_long_texts_are_cut_where_str_split_would_cut_them():
    """A word cut in two by SYSTEM_COMPARED: the head's words, read with numpy, are the split's."""
    head = "abcdefghijk " * (SYSTEM_COMPARED // 12) + "tail"
    for extra in ("", "x", "xy z", " z"):
        a, b = head + extra, head[:-2] + extra
        assert _similar(a, b, _SystemGrams()) == reference_similar(a, b, SIMILAR_SYSTEM, SYSTEM_COMPARED)


def _numbers_by_search(words: _AsciiWords, number: _Numbers) -> list[int]:
    """:meth:`_AsciiWords.numbers` the plain way: each word's place among the distinct integers by
    binary search (the longer words by their text)."""
    import numpy as np

    names = [v.to_bytes(8, "big").rstrip(b"\0").decode("ascii") for v in words.first.tolist()]
    table = np.array([number[name] if name else -1 for name in names], dtype=np.int64)
    ids = table[words.first.searchsorted(words.heads)]
    for j in words.longer.tolist():
        ids[j] = number[words.text[words.starts[j] : words.ends[j]]]
    return ids.tolist()  # type: ignore[no-any-return]


@CHECKED
@given(
    st.lists(ascii_texts(), min_size=1, max_size=4),
    st.sampled_from([None, 0, 1, 3, 1 << 63]),
    st.sampled_from([None, 1, 2, 4]),
    st.data(),
)
def test_the_hashed_places_are_the_binary_search_ones(texts, multiplier, slot_bits, data):
    """The multiplicative hash that places a text's few distinct words (used only when it gives
    them distinct slots) and the table of the words numbered before (a text all of whose words it
    holds, each in its own slot, is numbered from it alone) number every word as the binary search
    does, in texts numbered one after the other, some of them again; a multiplier that makes slots
    collide (0, 1<<63) falls back to the search, and a table of 2-16 slots keeps only some words."""
    import rollout_graph.analysis.near_miss.texts as near_miss

    texts = texts + data.draw(st.lists(st.sampled_from(texts), max_size=3))  # texts met again: read from the table
    saved, bits = near_miss._SPREAD, _Numbers.SLOT_BITS
    try:
        if multiplier is not None:
            near_miss._SPREAD = multiplier
        if slot_bits is not None:
            _Numbers.SLOT_BITS = slot_bits
        fast, plain = _Numbers(), _Numbers()
        for text in texts:
            words = _AsciiWords.of(text)
            assert words is not None
            assert words.numbers(fast).tolist() == _numbers_by_search(words, plain)
        assert dict(fast) == dict(plain)
    finally:
        near_miss._SPREAD, _Numbers.SLOT_BITS = saved, bits


def test_the_table_is_emptied_with_the_numbering():
    """Numbering started over (a pass past its word budget) forgets the table too: the words of a
    text numbered before get their new numbers, not the old ones."""
    number = _Numbers()
    first = _AsciiWords.of("x y z w")
    again = _AsciiWords.of("w z")
    assert first is not None and again is not None
    assert first.numbers(number).tolist() == [1, 2, 3, 0]  # (new words numbered in the order of their integers)
    number.clear()
    assert again.numbers(number).tolist() == [0, 1]
    assert first.numbers(number).tolist() == [2, 3, 1, 0]


def test_many_distinct_words_are_placed_by_the_search():
    """Past ``_SPREAD_MOST`` distinct words the search places them (the same numbers either way)."""
    from rollout_graph.analysis.near_miss.texts import _SPREAD_MOST

    text = " ".join(f"w{i}" for i in range(_SPREAD_MOST + 5)) + " w3 w70 w0"
    words = _AsciiWords.of(text)
    assert words is not None
    assert words.numbers(_Numbers()).tolist() == _numbers_by_search(words, _Numbers())
    _same_partition(words.numbers(_Numbers()).tolist(), text.split())
