"""The linker's one hash (graph/core/linking.py ``_terms``): prefix hashes, block prefix hashes
and end hashes are sums of the same terms, so each agrees with the others on the same ids; and
the paths the linker takes (classes of prompts by their first ids, checked directly or filtered
by hash, ends shorter than the head matched by hash) link exactly as the naive reference
(tests/support/reference.py) whatever the head's length and the direct threshold."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.core import linking
from rollout_graph.core.linking import prefix_hashes, token_parents
from tests.core.test_linking_shared import _arena_calls
from tests.support.builders import calls_from_tokens, examples, harness_traces
from tests.support.reference import reference_token_parents

FAST = settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])

_ids = st.lists(st.integers(-(2**31), 2**31 - 1), max_size=30)
_dtypes = st.sampled_from(["int32", "int64", "strided"])


def _shaped(ids: list[int], kind: str) -> np.ndarray:
    a = np.array(ids, dtype=np.int32)
    return a.astype(np.int64) if kind == "int64" else np.repeat(a, 2)[::2] if kind == "strided" else a


@FAST
@given(st.lists(st.tuples(_ids, _dtypes), min_size=1, max_size=5), st.data())
def test_segment_hashes_add_up_to_the_prefix_hash_of_the_pieces_end_to_end(parts, data):
    # pieces, each counted from where it starts in the whole sequence, hash together as the whole
    # sequence does: a call's end hash (its prompt's, plus its sampled ids' terms after it) is the
    # prefix hash a child's prompt has at that length
    pieces = [_shaped(ids, kind) for ids, kind in parts]
    whole = np.concatenate([p.astype(np.int64) for p in pieces])
    at = np.cumsum([0] + [p.shape[0] for p in pieces[:-1]]).tolist()
    assume(whole.shape[0] > 0)
    block = data.draw(st.integers(1, 64))
    original = linking._TAIL_IDS
    linking._TAIL_IDS = block
    try:
        segments = linking._segment_hashes(pieces, at)
    finally:
        linking._TAIL_IDS = original
    full = prefix_hashes(whole)
    with np.errstate(over="ignore"):
        assert int(np.add.reduce(segments, dtype=np.uint64)) == int(full[-1])
        assert int(segments[0]) == int(full[pieces[0].shape[0]])
    cut = data.draw(st.integers(0, whole.shape[0]))
    assert np.array_equal(prefix_hashes(whole[:cut]), full[: cut + 1])


@FAST
@given(_ids, _ids, _dtypes, _dtypes)
def test_equal_ids_hash_alike_in_any_dtype(a, b, kind_a, kind_b):
    x, y = _shaped(a, kind_a), _shaped(b, kind_b)
    hx, hy = prefix_hashes(x), prefix_hashes(y)
    same = 0
    while same < min(len(a), len(b)) and a[same] == b[same]:
        same += 1
    assert np.array_equal(hx[: same + 1], hy[: same + 1])
    assume(same < min(len(a), len(b)))  # a first difference: the hashes part there (no collision drawn)
    assert hx[same + 1] != hy[same + 1]


@FAST
@given(
    harness_traces(max_calls=16),
    st.integers(1, 5),
    st.sampled_from([0, 3, 10**9]),
    st.data(),
)
def test_every_path_links_as_the_reference(spec, head, direct, data):
    assume(sum(p is not None and len(p) >= head for p, _ in spec) >= 2)  # some class has prompts to link
    kinds = st.sampled_from(["arena", "arena", "copy", "int64", "strided"])
    calls = _arena_calls(spec, [data.draw(kinds) for _ in spec])
    assert _links_with(calls, head, direct) == reference_token_parents(spec)


def _links_with(calls, head: int, direct: int):
    """token_parents with the class head's length and the direct-pairs bound set (then restored)."""
    original = linking._HEAD, linking._DIRECT_PAIRS
    try:
        linking._HEAD, linking._DIRECT_PAIRS = head, direct
        return token_parents(calls)
    finally:
        linking._HEAD, linking._DIRECT_PAIRS = original


@FAST
@given(st.lists(st.tuples(_ids, _ids), min_size=2, max_size=8), st.integers(1, 4), st.data())
def test_wide_ids_and_mixed_dtypes_link_as_the_reference(raw, head, data):
    # ids of the whole int32 range (negatives too), each call's prompt continuing an earlier end
    # now and then, prompts of int32, int64 or strided arrays: the head keys and the hashes
    # convert every dtype alike
    spec: list[tuple[list[int] | None, list[int]]] = []
    for prompt, sampled in raw:
        if spec and data.draw(st.booleans()):
            p, s = spec[data.draw(st.integers(0, len(spec) - 1))]
            prompt = (p or []) + s + prompt
        spec.append((prompt, sampled))
    assume(any(len(p or []) >= head for p, _ in spec))
    calls = calls_from_tokens(spec)
    for call in calls:
        if call.prompt_ids is not None:
            call.prompt_ids = _shaped(call.prompt_ids.tolist(), data.draw(_dtypes))
    for direct in (0, 10**9):
        assert _links_with(calls, head, direct) == reference_token_parents(spec)


def test_a_head_running_into_the_sampled_ids_finds_its_class():
    # n0's prompt is shorter than the head: its end's head is its prompt and its first sampled ids
    spec = [([7], [8, 9, 10]), ([7, 8, 9, 10, 11], [1]), ([7, 8, 9, 12], [2])]
    original = linking._HEAD, linking._DIRECT_PAIRS
    try:
        for direct in (0, 10**9):
            linking._HEAD, linking._DIRECT_PAIRS = 3, direct
            assert token_parents(calls_from_tokens(spec)) == reference_token_parents(spec) == [None, 0, None]
    finally:
        linking._HEAD, linking._DIRECT_PAIRS = original
