"""Collapsed chains: a view of the graph that never changes which calls exist or their parents."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rollout_graph.analysis.chains import collapse, linear_chains, pinned_calls, restore_parents, structural_pins
from tests.support.builders import rollout_of_tokens


@st.composite
def forests(draw):
    """Random parent arrays (each call's parent arrives earlier), random extra pins and expansions."""
    n = draw(st.integers(1, 60))
    parents: list[int | None] = [None]
    for i in range(1, n):
        root = draw(st.booleans().map(lambda b: b and draw(st.integers(0, 9)) == 0))
        parents.append(None if root else draw(st.integers(max(0, i - 4), i - 1)))
    keep = draw(st.sets(st.integers(0, n - 1), max_size=n // 4))
    return parents, keep, draw(st.data())


@given(forests())
def test_collapsing_and_expanding_never_changes_calls_or_parents(case):
    parents, keep, data = case
    n = len(parents)
    pins = structural_pins(parents) | keep
    chains = linear_chains(parents, pins, n_prompt=list(range(0, 10 * n, 10)))
    assume(chains)  # only forests that have something to collapse say anything
    expanded = data.draw(st.sets(st.sampled_from([c.key for c in chains])))
    for chosen in (set(), expanded, {c.key for c in chains}):
        view = collapse(n, parents, chains, chosen)
        assert restore_parents(view, n) == parents
        hidden = [i for c in view.chains for i in c.calls]
        assert sorted(view.visible + hidden) == list(range(n))  # every call exactly once
        assert pins <= set(view.visible)  # pinned calls always drawn as nodes
        for v in view.visible:  # a drawn parent is visible, and is the exact parent unless a chain sits between
            p = view.drawn_parent[v]
            assert p is None or p in view.visible
            if v not in view.via:
                assert p == parents[v]
    for c in chains:
        assert c.token_growth == 10 * (c.after - c.before)
        assert all(parents[b] == a for a, b in zip((c.before, *c.calls), (*c.calls, c.after), strict=True))


def test_chain_between_a_root_and_a_leaf():
    spec = [(list(range(k)), [k]) for k in range(1, 8)]  # one straight conversation of 7 calls
    r = rollout_of_tokens(spec)
    chains = linear_chains(r.topology.parents, pinned_calls(r), [c.n_prompt for c in r.calls])
    assert [(c.before, c.calls, c.after) for c in chains] == [(0, (1, 2, 3, 4, 5), 6)]
    assert chains[0].token_growth == r.calls[6].n_prompt - r.calls[0].n_prompt
    assert collapse(7, r.topology.parents, chains).visible == [0, 6]
    # the selected call stays a node and splits the chain
    split = linear_chains(r.topology.parents, pinned_calls(r, keep={3}))
    assert [c.calls for c in split] == [(1, 2), (4, 5)]


def test_unpinned_structure_is_refused():
    with pytest.raises(ValueError, match="must be pinned"):
        linear_chains([None, 0, 1], pinned={0})
