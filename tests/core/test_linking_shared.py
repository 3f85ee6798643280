"""Linking's shortcuts for prompts that are the same memory (graph/core/linking.py): prompts that
start at one place are hashed once, and a prompt part that is the same memory as the candidate's
is equal without reading it. Each must give exactly what the plain arrays give: the naive
reference (tests/support/reference.py) on random traces whose prompts are views of shared arenas, as the
loader makes them (rollout_graph.ingest.shortcuts.id_arrays), and odd arrays that share a start but not
their ids."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss import common_prefix
from rollout_graph.core import linking
from rollout_graph.core.ids import same_ids, start_of
from rollout_graph.core.linking import link, token_parents
from rollout_graph.core.records import Call
from tests.support.builders import calls_from_tokens, examples, harness_traces
from tests.support.reference import reference_token_parents

FAST = settings(max_examples=examples(2000), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _arena_calls(spec, choices) -> list[Call]:
    """The spec's calls with prompts placed in one arena as the loader places them: a prompt that
    extends the array written last in its slot adds its tail there, one that is a prefix of a
    slot's ids is a view of it, any other starts a new slot; ``choices`` (one per call) sometimes
    give a plain copy, an int64 copy or a strided view instead."""
    arena = np.zeros(4096, dtype=np.int32)
    top = 0
    slots: list[tuple[int, int]] = []  # (start, ids written)
    calls = calls_from_tokens(spec)
    for call, (prompt, _), choice in zip(calls, spec, choices, strict=True):
        if prompt is None:
            continue
        ids = np.array(prompt, dtype=np.int32)
        n = ids.shape[0]
        if choice == "copy":
            call.prompt_ids = ids
            continue
        if choice == "int64":
            call.prompt_ids = ids.astype(np.int64)
            continue
        if choice == "strided":  # every other id of a doubled array: a start of its own
            doubled = np.repeat(ids, 2)
            call.prompt_ids = doubled[::2]
            continue
        view = None
        for k, (start, written) in enumerate(slots):
            if written >= n and np.array_equal(arena[start : start + n], ids):
                view = arena[start : start + n]
                break
            at_top = start + written == top
            if at_top and np.array_equal(arena[start : start + written], ids[:written]):
                arena[top : start + n] = ids[written:]
                top = start + n
                slots[k] = (start, n)
                view = arena[start : start + n]
                break
        if view is None:
            arena[top : top + n] = ids
            slots.append((top, n))
            view = arena[top : top + n]
            top += n
        call.prompt_ids = view
    arena.flags.writeable = False
    return calls


@FAST
@given(harness_traces(max_calls=18), st.data())
def test_prompts_sharing_memory_link_as_the_reference(spec, data):
    kinds = st.sampled_from(["arena", "arena", "arena", "copy", "int64", "strided"])
    choices = [data.draw(kinds) for _ in spec]
    calls = _arena_calls(spec, choices)
    assert token_parents(calls) == reference_token_parents(spec)
    assert link(calls).parents == link(calls_from_tokens(spec)).parents


@FAST
@given(harness_traces(max_calls=12), st.sampled_from([(32, 256), (1, 0), (2, 0), (1, 10**9)]))
def test_hash_collisions_never_decide_on_shared_memory(spec, paths):
    calls = _arena_calls(spec, ["arena"] * len(spec))
    with_hashes = token_parents(calls)
    original = linking._terms, linking._HEAD, linking._DIRECT_PAIRS
    try:  # every hash collides: only the ids may decide
        linking._terms = lambda pieces, at=None: np.zeros(sum(len(p) for p in pieces), dtype=np.uint64)
        linking._HEAD, linking._DIRECT_PAIRS = paths
        assert token_parents(calls) == with_hashes == reference_token_parents(spec)
    finally:
        linking._terms, linking._HEAD, linking._DIRECT_PAIRS = original


def test_a_shared_start_with_other_strides_is_other_ids():
    # b reads every other id from a's first one: the same start in memory, not the same ids
    base = np.array([1, 9, 2, 9, 3, 9, 4, 9], dtype=np.int32)
    a = base[:4]  # 1 9 2 9
    b = base[::2]  # 1 2 3 4
    calls = calls_from_tokens([([1], [9]), ([1, 2], [3]), (None, []), (None, [])])
    calls[2].prompt_ids, calls[2].sampled_ids = a, np.array([5], dtype=np.int32)
    calls[3].prompt_ids, calls[3].sampled_ids = b, np.array([6], dtype=np.int32)
    spec = [([1], [9]), ([1, 2], [3]), ([1, 9, 2, 9], [5]), ([1, 2, 3, 4], [6])]
    assert token_parents(calls) == reference_token_parents(spec) == [None, None, 0, 1]


def test_same_ids_reads_the_ids_unless_they_are_the_same_memory():
    base = np.arange(10, dtype=np.int32)
    assert same_ids(base[:4], base[:4].copy())
    assert same_ids(base[2:6], base[2:6])
    assert not same_ids(base[:4], base[1:5])
    assert not same_ids(base[:4], base[:5])
    assert not same_ids(base[:4], base[::2][:4])
    assert same_ids(base[:0], np.empty(0, dtype=np.int64))


@FAST
@given(harness_traces(max_calls=10), st.data())
def test_common_prefix_of_shared_memory_is_the_plain_one(spec, data):
    kinds = st.sampled_from(["arena", "arena", "copy", "int64", "strided"])
    calls = _arena_calls(spec, [data.draw(kinds) for _ in spec])
    for e, (e_prompt, e_sampled) in enumerate(spec):
        if e_prompt is None:
            continue
        end = e_prompt + e_sampled
        for (prompt, _), call in zip(spec, calls, strict=True):
            if prompt is None:
                continue
            plain = next(
                (k for k, (x, y) in enumerate(zip(end, prompt, strict=False)) if x != y), min(len(end), len(prompt))
            )
            assert common_prefix(calls[e], call.prompt_ids) == plain


@FAST
@given(harness_traces(max_calls=14), st.integers(1, 6))
def test_end_hashes_in_small_blocks_link_the_same(spec, block):
    calls = _arena_calls(spec, ["arena"] * len(spec))
    whole = token_parents(calls)
    original = linking._TAIL_IDS
    linking._TAIL_IDS = block  # many blocks, a call's sampled ids longer than a block
    try:
        assert token_parents(calls) == whole == reference_token_parents(spec)
    finally:
        linking._TAIL_IDS = original


@FAST
@given(harness_traces(max_calls=14), st.integers(1, 8), st.data())
def test_groups_hashed_in_small_blocks_link_the_same(spec, ids, data):
    kinds = st.sampled_from(["arena", "arena", "copy", "int64", "strided"])
    calls = _arena_calls(spec, [data.draw(kinds) for _ in spec])
    whole = token_parents(calls)
    original = linking._BLOCK_IDS
    linking._BLOCK_IDS = ids  # many blocks, a prompt longer than a block
    try:
        assert token_parents(calls) == whole == reference_token_parents(spec)
    finally:
        linking._BLOCK_IDS = original


@FAST
@given(
    st.lists(
        st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40).map(lambda xs: np.array(xs, dtype=np.int32)),
        min_size=1,
        max_size=6,
    ),
    st.data(),
)
def test_block_prefix_hashes_are_each_prompts_own(prompts, data):
    # int32, int64 and strided prompts, negative ids included: each prompt's prefix hashes, read
    # from the block's, are exactly prefix_hashes' (the hashes the live linker and the ends use)
    shaped = []
    for p in prompts:
        kind = data.draw(st.sampled_from(["int32", "int64", "strided"]))
        shaped.append(p.astype(np.int64) if kind == "int64" else np.repeat(p, 2)[::2] if kind == "strided" else p)
    flat, offsets = linking._block_prefix_hashes(shaped)
    assert offsets.shape[0] == len(shaped) + 1
    for k, p in enumerate(shaped):
        with np.errstate(over="ignore"):
            mine = flat[offsets[k] : offsets[k] + p.shape[0] + 1] - flat[offsets[k]]
        assert np.array_equal(mine, linking.prefix_hashes(p))


def test_a_start_is_where_the_array_interface_says_the_ids_start():
    base = np.arange(20, dtype=np.int32)
    base.flags.writeable = False
    for ids in (base, base[3:9], base[::2], base[5:5], base[19:], np.empty(0, dtype=np.int64), base.astype(np.int64)):
        assert start_of(ids) == (ids.__array_interface__["data"][0], ids.strides, ids.dtype)
    assert start_of(base[:4]) == start_of(base[:9]) != start_of(base[1:4])
