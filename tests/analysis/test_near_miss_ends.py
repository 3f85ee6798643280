"""The near-miss candidate search's sorted ends (``_Ends`` in graph/analysis/near_miss/ids.py) against
the keyed search it replaced: every call's end ids, cut to the longest looked-up prompt, copied
into big-endian keys, sorted as (key, call) pairs and searched with ``bisect_left``.

The new search keeps no key: it sorts chunk by chunk and finds a prompt's place by comparing ids
(from the call's own place when it is given). The order and every place must be the keyed ones, on
ids that share long prefixes, tie exactly, end inside a chunk or on its edge, cross byte boundaries
(255/256, 65535/65536), are negative or need 64 bits; and a whole near-miss pass must find what the
keyed search finds."""

from __future__ import annotations

import bisect

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rollout_graph.analysis.near_miss import ids, search
from rollout_graph.analysis.near_miss.ids import _Ends, _key, _prompt
from rollout_graph.core.records import Call
from tests.support.builders import examples, harness_traces, rollout_of_tokens

CHECKED = settings(max_examples=examples(800), deadline=None, suppress_health_check=[HealthCheck.too_slow])
NARROW = [0, 1, 2, 255, 256, 65535, 65536, -1]
WIDE = NARROW + [2**31, 2**32 + 1, 2**40]


class _KeyedEnds:
    """The search as it was: a key per call, sorted, bisected."""

    def __init__(self, calls, nodes, limit):
        self.wide = any(_prompt(calls[i]).dtype.itemsize > 4 or calls[i].sampled_ids.dtype.itemsize > 4 for i in nodes)
        pairs = []
        for i in nodes:
            head = _prompt(calls[i])[:limit]
            tail = calls[i].sampled_ids[: max(0, limit - head.shape[0])]
            pairs.append((_key(np.concatenate([head, tail]) if tail.shape[0] else head, self.wide), i))
        pairs.sort()
        self.keys = [k for k, _ in pairs]
        self.nodes = [i for _, i in pairs]
        self.rank = {node: j for j, node in enumerate(self.nodes)}

    @classmethod
    def of(cls, calls, nodes, limit, budget=None, n_ends=None):
        return cls(calls, nodes, limit)

    def position(self, calls, prompt, hint=None):
        return bisect.bisect_left(self.keys, _key(prompt, self.wide))


@st.composite
def sequences(draw, alphabet, stem):
    """Ids that mostly start with a shared stem, cut or extended by a few ids."""
    head = stem[: draw(st.integers(0, len(stem)))] if draw(st.booleans()) else []
    return head + draw(st.lists(st.sampled_from(alphabet), max_size=6))


@st.composite
def traces(draw):
    wide = draw(st.booleans())
    alphabet = draw(st.lists(st.sampled_from(WIDE if wide else NARROW), min_size=1, max_size=4, unique=True))
    stem = draw(st.lists(st.sampled_from(alphabet), min_size=0, max_size=20))
    dtype = np.int64 if wide else np.int32
    calls = []
    for n in range(draw(st.integers(1, 14))):
        prompt, sampled = draw(sequences(alphabet, stem)), draw(st.lists(st.sampled_from(alphabet), max_size=4))
        calls.append(Call(f"c{n}", "s", "t", n + 1, "flat", np.array(prompt, dtype), np.array(sampled, dtype)))
    queries = [np.array(q, dtype) for q in draw(st.lists(sequences(alphabet, stem), max_size=6))]
    return calls, queries


@CHECKED
@given(traces(), st.integers(1, 6), st.integers(1, 40), st.data())
def test_the_sorted_ends_and_every_place_are_the_keyed_ones(trace, chunk, budget, data):
    calls, queries = trace
    nodes = [i for i, c in enumerate(calls) if c.n_end > 0]
    assume(nodes)
    prompts = [_prompt(calls[i]) for i in nodes] + queries
    limit = max(p.shape[0] for p in prompts) + data.draw(st.integers(0, 3))  # a limit no prompt passes
    old = _KeyedEnds(calls, nodes, limit)
    original = _Ends.CHUNK
    _Ends.CHUNK = chunk  # small chunks: sequences end inside a chunk, on its edge and after many
    try:
        new = _Ends.of(calls, nodes, limit, budget)
    finally:
        _Ends.CHUNK = original
    assert new.nodes == old.nodes
    assert new.rank == old.rank
    for prompt in prompts:
        assert new.position(calls, prompt) == old.position(calls, prompt)
    for i in nodes:  # a call's own place is a hint that never sorts before its prompt
        prompt = _prompt(calls[i])
        assert new.position(calls, prompt, new.rank[i]) == old.position(calls, prompt)


def test_ties_keep_call_order_across_chunks():
    """Identical ends longer than many chunks stay in call order, as the (key, call) pairs sorted."""
    ids = np.arange(40, dtype=np.int32)
    calls = [Call(f"c{n}", "s", "t", n + 1, "flat", ids.copy(), np.array([n % 2], np.int32)) for n in range(6)]
    original = _Ends.CHUNK
    _Ends.CHUNK = 3
    try:
        ends = _Ends.of(calls, list(range(6)), 41, budget=1)
    finally:
        _Ends.CHUNK = original
    assert ends.nodes == [0, 2, 4, 1, 3, 5]
    assert ends.position(calls, ids) == 0 and ends.position(calls, ids, ends.rank[3]) == 0


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(harness_traces(max_calls=24))
def test_a_near_miss_pass_finds_what_the_keyed_search_finds(spec):
    fast = rollout_of_tokens(spec).near_misses
    assume(fast)
    original = search._Ends
    search._Ends = _KeyedEnds  # type: ignore[misc, assignment]
    try:
        plain = rollout_of_tokens(spec).near_misses
    finally:
        search._Ends = original
    assert fast == plain


def _walk_one_by_one(calls, node, ends, root_of, order=None):
    """The candidate walk as it was: every neighbour looked at in turn, later arrivals too."""
    prompt = _prompt(calls[node])
    start = ends.position(calls, prompt, ends.rank.get(node))
    best: list = []
    for step in (-1, 1):
        j = start - 1 if step < 0 else start
        while 0 <= j < len(ends.nodes):
            c = ends.nodes[j]
            j += step
            if c >= node or root_of[c] == node or np.array_equal(_prompt(calls[c]), prompt):
                continue
            shared = ids.common_prefix(calls[c], prompt)
            if best and shared < best[0][0]:
                break
            if best and shared == best[0][0]:
                if len(best) >= ids.TIES or shared < ids.TIED_SHARED:
                    break
                best.append((shared, c))
            else:
                best = [(shared, c)]
    if best and best[0][0] < ids.TIED_SHARED:  # a thin tie: the latest call before the node, when it shares as many
        for c in range(node - 1, best[0][1], -1):
            if calls[c].prompt_ids is None or root_of[c] == node or np.array_equal(_prompt(calls[c]), prompt):
                continue
            if ids.common_prefix(calls[c], prompt) == best[0][0]:
                best = [(best[0][0], c)]
            break
    return best


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(harness_traces(max_calls=40), st.sampled_from([1, 2, 16]))
def test_passing_later_arrivals_a_block_at_a_time_finds_what_the_plain_walk_finds(spec, block):
    first_block = ids._FIRST_BLOCK
    ids._FIRST_BLOCK = block  # small blocks: walks cross many of them
    try:
        fast = rollout_of_tokens(spec).near_misses
    finally:
        ids._FIRST_BLOCK = first_block
    original = search._best_candidates
    search._best_candidates = _walk_one_by_one
    try:
        plain = rollout_of_tokens(spec).near_misses
    finally:
        search._best_candidates = original
    assert fast == plain
