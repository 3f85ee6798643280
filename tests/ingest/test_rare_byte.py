"""``find_by_rare_byte`` is ``bytes.find`` (graph/ingest/files/search.py): at any rare byte of the
key, any number of tries, with the default search or a compiled pattern's, in any window."""

from __future__ import annotations

import re

from hypothesis import assume, given
from hypothesis import strategies as st

from rollout_graph.ingest.files.search import find_by_rare_byte

_bytes = st.binary(max_size=200).map(
    lambda b: b.translate(bytes(range(256))[:4] * 64)
)  # a 4-byte alphabet: many near misses


@given(
    _bytes,
    st.binary(min_size=1, max_size=5).map(lambda b: b.translate(bytes(range(256))[:4] * 64)),
    st.integers(0, 220),
    st.integers(0, 220),
    st.integers(0, 4),
    st.integers(0, 20),
    st.booleans(),
)
def test_it_finds_what_bytes_find_finds(raw, key, start, end, rare, tries, compiled):
    assume(rare < len(key))
    search = re.compile(re.escape(key)).search if compiled else None
    assert find_by_rare_byte(raw, key, start, end, rare, tries, search) == raw.find(key, start, end)


def test_the_keys_the_readers_look_for():
    line = b'{"request":{"messages":[{"content":"a [b] _c_ ]x"}]},"logprobs":{"content":[1]},"prompt_token_ids":[1]}'
    for key, rare in ((b'"logprobs":{"content":[', 22), (b']},"logprobs"', 0), (b'_token_ids":[', 0)):
        for tries in (0, 1, 2, 16):
            assert find_by_rare_byte(line, key, 0, len(line), rare, tries) == line.find(key)
