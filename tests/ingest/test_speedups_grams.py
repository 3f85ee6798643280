"""The C word 3-gram count (graph/ingest/csrc/word_grams.c, ``gram_counts``) against the word-tuple sets
of ``str.split()`` it stands for, and the near-miss pass's system-text decision with it on and off.

``gram_counts(a, b)`` is (distinct 3-grams in both, distinct 3-grams of a plus those of b) for two
ASCII texts of 20 words or more, else None: checked on random texts full of ASCII whitespace (the
\\x1c-\\x1f separators included), NUL bytes, words longer than 8 and 16 bytes that differ only late,
on random and mutated bytes (anything not ASCII is None), and at the 20-word boundary."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis import near_miss
from rollout_graph.analysis.near_miss import SIMILAR_SYSTEM, SYSTEM_COMPARED, _similar
from rollout_graph.ingest import speedups
from tests.support.builders import examples
from tests.support.reference import reference_similar

pytestmark = pytest.mark.skipif(speedups.native is None, reason="the C speedups are not built")
CHECKED = settings(max_examples=examples(2000), deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = ["a", "b", "the", "ls", "x\0", "\0", "\0x", "main.py", "abcdefgh", "abcdefghi", "abcdefgj"]
WORDS += ["abcdefghijklmnop", "abcdefghijklmnoq", "abcdefghijklmnopq", "abcdefghijklmnopr", "z" * 40, "z" * 41]
SPACES = [" ", "  ", "\n", "\t", "\x0b", "\x0c", "\r\n", "\x1c", "\x1d", "\x1e", "\x1f", " \x1f\t"]


def reference_counts(a: bytes, b: bytes) -> tuple[int, int] | None:
    """What ``gram_counts`` must return, from the tuple sets of ``str.split()``."""
    if not a.isascii() or not b.isascii():
        return None
    words_a, words_b = a.decode("ascii").split(), b.decode("ascii").split()
    if len(words_a) < 20 or len(words_b) < 20:
        return None
    grams_a = set(zip(words_a, words_a[1:], words_a[2:], strict=False))
    grams_b = set(zip(words_b, words_b[1:], words_b[2:], strict=False))
    return len(grams_a & grams_b), len(grams_a) + len(grams_b)


@st.composite
def texts(draw, lowest: int = 0):
    n = draw(st.integers(lowest, 80))
    words = draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n))
    seps = draw(st.lists(st.sampled_from(SPACES), min_size=n, max_size=n))
    lead = draw(st.sampled_from(["", " ", "\x1c\n"]))
    return (lead + "".join(w + s for w, s in zip(words, seps, strict=True))).encode("ascii")


@st.composite
def edited(draw, text: bytes):
    """``text`` with a few words changed, inserted or dropped (pairs near the threshold)."""
    words = text.split()
    for _ in range(draw(st.integers(0, 10))):
        at = draw(st.integers(0, len(words)))
        word = draw(st.sampled_from(WORDS)).encode("ascii")
        op = draw(st.sampled_from(["change", "insert", "drop"]))
        if op == "insert" or not words:
            words.insert(at, word)
        elif op == "drop":
            words.pop(min(at, len(words) - 1))
        else:
            words[min(at, len(words) - 1)] = word
    return draw(st.sampled_from(SPACES)).encode("ascii").join(words)


@CHECKED
@given(texts(), st.data())
def test_counts_are_the_tuple_sets(a, data):
    b = data.draw(st.one_of(texts(), edited(a)))
    assert speedups.native.gram_counts(a, b) == reference_counts(a, b)
    assert speedups.native.gram_counts(b, a) == reference_counts(b, a)
    assert speedups.native.gram_counts(a, a) == reference_counts(a, a)


@CHECKED
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_random_bytes(a, b):
    assert speedups.native.gram_counts(a, b) == reference_counts(a, b)


@CHECKED
@given(texts(lowest=20), st.data())
def test_mutated_bytes(a, data):
    """A text with bytes overwritten by any byte (>= 0x80: None), inserted or cut short."""
    raw = bytearray(a)
    for _ in range(data.draw(st.integers(0, 6))):
        at = data.draw(st.integers(0, len(raw)))
        byte = data.draw(st.integers(0, 255))
        if data.draw(st.booleans()) and at < len(raw):
            raw[at] = byte
        else:
            raw.insert(at, byte)
    cut = bytes(raw[: data.draw(st.integers(0, len(raw)))])
    for b in (bytes(raw), cut):
        assert speedups.native.gram_counts(a, b) == reference_counts(a, b)
        assert speedups.native.gram_counts(b, a) == reference_counts(b, a)


def test_the_twenty_word_boundary_and_types():
    nineteen, twenty = b" ".join([b"w"] * 19), b" ".join([b"w%d" % i for i in range(20)])
    assert speedups.native.gram_counts(nineteen, twenty) is None
    assert speedups.native.gram_counts(twenty, nineteen) is None
    assert speedups.native.gram_counts(twenty, twenty) == (18, 36)
    assert speedups.native.gram_counts(twenty + b"\x80", twenty) is None
    with pytest.raises(TypeError):
        speedups.native.gram_counts("text", b"text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        speedups.native.gram_counts(b"text")  # type: ignore[call-arg]


def test_a_large_pair():
    """Texts past the kept working memory (1 MB) take memory of their own, with the same counts."""
    a = b" ".join(b"w%d" % (i % 5000) for i in range(60_000))
    b = b" ".join(b"w%d" % (i % 7000) for i in range(50_000))
    assert speedups.native.gram_counts(a, b) == reference_counts(a, b)
    assert speedups.native.gram_counts(b" x" * 30, b" x" * 30) == (1, 2)  # the kept block again


SYSTEM_WORDS = ["the", "agent", "ran", "ls", "main.py", "fixed", "a", "b", "é", "abcdefghijk", "abcdefghijz"]


@st.composite
def system_texts(draw):
    n = draw(st.integers(0, 60))
    words = draw(st.lists(st.sampled_from(SYSTEM_WORDS), min_size=n, max_size=n))
    seps = draw(st.lists(st.sampled_from([" ", "\n", "\x1f", "\u00a0"]), min_size=n, max_size=n))
    return "".join(w + s for w, s in zip(words, seps, strict=True))


@pytest.mark.parametrize("native", ["on", "off"])
@CHECKED
@given(system_texts(), system_texts(), st.integers(0, 8))
def test_the_decision_with_and_without_the_count(native, a, b, overlap):
    b = a[: overlap * 7] + b  # pairs sharing a head, near the threshold
    saved = speedups.native
    try:
        if native == "off":
            speedups.native = None
        grams = near_miss._SystemGrams()
        assert _similar(a, b, grams) == reference_similar(a, b, SIMILAR_SYSTEM, SYSTEM_COMPARED)
        long_a, long_b = a * (SYSTEM_COMPARED // max(len(a), 1) + 1), b * 90  # over the compared head
        assert _similar(long_a, long_b, grams) == reference_similar(long_a, long_b, SIMILAR_SYSTEM, SYSTEM_COMPARED)
    finally:
        speedups.native = saved
