"""Incremental linking (graph/live/linking.py) equals batch linking at every step, for every
arrival order: against rollout_graph.core.linking.link and the naive tests/support/reference.py."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rollout_graph.core.linking import MESSAGES, TOKENS, link
from rollout_graph.live.linking import IncrementalLinker
from tests.support.builders import calls_from_tokens, harness_traces, message_traces
from tests.support.reference import reference_message_parents, reference_token_parents

SETTINGS = settings(max_examples=500, deadline=None)


def _replay(linker: IncrementalLinker, changes, parents: dict[int, int | None]) -> None:
    """Apply the reported relinks to a copy: it must track the linker's own state."""
    for change in changes:
        assert change.new == (change.node not in parents)
        if not change.new:
            assert parents[change.node] == change.previous
        parents[change.node] = change.parent


def _check_prefix_state(linker: IncrementalLinker, calls, arrived: list[int]) -> None:
    """The linker's state equals batch linking of the calls present, taken in key order."""
    present = sorted(arrived)
    ordered, links = linker.links()
    assert [id(c) for c in ordered] == [id(calls[i]) for i in present]
    assert links == link([calls[i] for i in present])


@SETTINGS
@given(harness_traces(), st.randoms(use_true_random=False))
def test_incremental_token_linking_equals_batch_for_every_arrival_order(spec, rnd):
    assume(len(spec) > 1)
    calls = calls_from_tokens(spec)
    order = list(range(len(calls)))
    rnd.shuffle(order)
    linker = IncrementalLinker()
    replayed: dict[int, int | None] = {}
    for step, i in enumerate(order):
        _replay(linker, linker.add(calls[i], key=i), replayed)
        _check_prefix_state(linker, calls, order[: step + 1])
    ordered, links = linker.links()
    assert links.parents == reference_token_parents(spec)
    assert all(v in (TOKENS, None) for v in links.linked_by)
    # the reported relinks, replayed, give the same parents (by internal arrival id)
    assert [replayed[n] for n in range(len(calls))] == linker.parents


@SETTINGS
@given(harness_traces())
def test_arrival_counter_keys_link_like_the_file_order(spec):
    calls = calls_from_tokens(spec)
    linker = IncrementalLinker()
    for call in calls:
        linker.add(call)
    assert linker.links()[1] == link(calls)


@SETTINGS
@given(message_traces(), st.randoms(use_true_random=False))
def test_incremental_message_linking_equals_batch_for_every_arrival_order(calls, rnd):
    assume(any(c.prompt_ids is None for c in calls))
    order = list(range(len(calls)))
    rnd.shuffle(order)
    linker = IncrementalLinker()
    replayed: dict[int, int | None] = {}
    for step, i in enumerate(order):
        _replay(linker, linker.add(calls[i], key=i), replayed)
        _check_prefix_state(linker, calls, order[: step + 1])
    _, links = linker.links()
    by_messages = {i: p for i, (p, v) in enumerate(zip(links.parents, links.linked_by, strict=True)) if v == MESSAGES}
    assert by_messages == reference_message_parents(calls)
    assert [replayed[n] for n in range(len(calls))] == linker.parents


def test_a_late_parent_adopts_the_child_that_arrived_first():
    calls = calls_from_tokens([([1, 2], [3]), ([1, 2, 3, 4], [5])])
    linker = IncrementalLinker()
    first = linker.add(calls[1], key=1)
    assert [(c.node, c.parent, c.new) for c in first] == [(0, None, True)]
    second = linker.add(calls[0], key=0)
    assert [(c.node, c.parent, c.previous, c.new) for c in second] == [(1, None, None, True), (0, 1, None, False)]
    assert linker.links()[1].parents == [None, 0]
