"""Linear chains: runs of calls that say nothing on their own, so a view may draw each as one segment.

A call is *pinned* (always drawn as a node, docs/semantics.md "Collapsed chains") when it is a
root, a fork, a leaf, a discarded retry, a call with findings, an end of a near-miss link, or one
the caller asks to keep (the selected call, search hits). Every other call has exactly one parent
and exactly one child; a maximal run of such calls along parent links is a :class:`Chain`, drawn
between its pinned ends ``before`` (the parent of its first call) and ``after`` (the child of its
last call).

Collapsing is a view of the graph, never a change to it: :func:`collapse` keeps every call either
visible or inside exactly one collapsed chain, and :func:`restore_parents` gives back the exact
parent of every call (a property test checks both).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rollout_graph.analysis.near_miss import COMPACTION, RETOKENIZED, RETRY, REWRITTEN

if TYPE_CHECKING:
    from rollout_graph.core.rollout import Rollout


@dataclass(frozen=True, slots=True)
class Chain:
    """A run of unpinned calls, each the only child of the one before."""

    calls: tuple[int, ...]  # arrival indices, root side first
    before: int  # the pinned parent of ``calls[0]``
    after: int  # the pinned child of ``calls[-1]``
    token_growth: int  # prompt tokens ``after`` has beyond ``before``'s prompt

    @property
    def key(self) -> int:
        """A stable id for the chain: its first call (chains never share calls)."""
        return self.calls[0]


@dataclass(frozen=True, slots=True)
class Collapsed:
    """What a view draws: the visible calls, each one's drawn parent, and the collapsed chains.

    ``drawn_parent[v]`` is ``v``'s exact parent when that parent is visible, or the ``before`` of
    the collapsed chain that ends just above ``v`` (then ``via[v]`` is that chain).
    """

    visible: list[int]  # arrival order
    drawn_parent: dict[int, int | None]
    via: dict[int, Chain]  # visible call -> the collapsed chain drawn as its incoming edge
    chains: list[Chain]  # the collapsed ones


def structural_pins(parents: Sequence[int | None]) -> set[int]:
    """Roots, forks and leaves: the calls whose place in the graph is itself information."""
    n_children = [0] * len(parents)
    for parent in parents:
        if parent is not None:
            n_children[parent] += 1
    return {i for i, p in enumerate(parents) if p is None or n_children[i] != 1}


def pinned_calls(rollout: Rollout, keep: Collection[int] = ()) -> set[int]:
    """Every call a view must draw as a node (see the module docstring).

    Args:
        rollout: the analysed rollout.
        keep: more calls to keep visible (the selected call, search hits ...).

    Returns:
        Arrival indices of the pinned calls.
    """
    pins = structural_pins(rollout.topology.parents)
    pins.update(rollout.topology.discarded)
    pins.update(i for i in range(len(rollout.calls)) if rollout.findings_for(i))
    for miss in (*rollout.near_misses.values(), *rollout.replaced_by.values()):
        pins.update((miss.earlier, miss.later))
    pins.update(compacted_calls(rollout).values())
    pins.update(keep)
    return pins


def linear_chains(
    parents: Sequence[int | None], pinned: Collection[int], n_prompt: Sequence[int] | None = None
) -> list[Chain]:
    """The maximal runs of unpinned calls, in order of their first call.

    Args:
        parents: the exact parent of each call (``None`` for a root).
        pinned: calls that stay visible; must include :func:`structural_pins` (roots, forks, leaves).
        n_prompt: prompt length of each call, for ``token_growth`` (0 when omitted).

    Returns:
        One :class:`Chain` per run.

    Raises:
        ValueError: when a root, fork or leaf is not pinned (a chain needs pinned ends).
    """
    pinned = set(pinned)
    missing = structural_pins(parents) - pinned
    if missing:
        raise ValueError(f"roots, forks and leaves must be pinned: {sorted(missing)[:5]}")
    only_child: dict[int, int] = {}  # read only for unpinned calls, which have exactly one child
    for child, parent in enumerate(parents):
        if parent is not None and parent not in pinned:
            only_child[parent] = child
    chains = []
    for start, parent in enumerate(parents):
        # a run starts at an unpinned call whose parent is pinned
        if start in pinned or parent is None or parent not in pinned:
            continue
        run = [start]
        while (nxt := only_child[run[-1]]) not in pinned:
            run.append(nxt)
        growth = 0 if n_prompt is None else int(n_prompt[nxt]) - int(n_prompt[parent])
        chains.append(Chain(tuple(run), parent, nxt, growth))
    return chains


def collapse(
    n_calls: int, parents: Sequence[int | None], chains: Sequence[Chain], expanded: Collection[int] = ()
) -> Collapsed:
    """Hide every chain whose key is not in ``expanded``.

    Args:
        n_calls: number of calls.
        parents: the exact parent of each call.
        chains: from :func:`linear_chains`.
        expanded: keys of chains to show call by call.

    Returns:
        The :class:`Collapsed` view.
    """
    expanded = set(expanded)
    folded = [c for c in chains if c.key not in expanded]
    hidden = {i for c in folded for i in c.calls}
    via = {c.after: c for c in folded}
    drawn: dict[int, int | None] = {}
    visible = [i for i in range(n_calls) if i not in hidden]
    for i in visible:
        drawn[i] = via[i].before if i in via else parents[i]
    return Collapsed(visible, drawn, via, folded)


def restore_parents(view: Collapsed, n_calls: int) -> list[int | None]:
    """Every call's exact parent, read back from a collapsed view (expanding every chain).

    Raises:
        ValueError: when a call is missing from the view or appears twice.
    """
    parents: list[int | None] = [None] * n_calls
    seen = [0] * n_calls
    for v in view.visible:
        seen[v] += 1
        chain = view.via.get(v)
        parents[v] = chain.calls[-1] if chain is not None else view.drawn_parent[v]
    for chain in view.chains:
        previous = chain.before
        for call in chain.calls:
            seen[call] += 1
            parents[call] = previous
            previous = call
    if any(count != 1 for count in seen):
        raise ValueError("a call is missing from the collapsed view or appears twice")
    return parents


def continuations(rollout: Rollout) -> dict[int, int]:
    """Roots that nearly continued an earlier call (a broken replay, re-tokenized or rewritten, or
    a compaction): root -> the call it nearly continued. A view lays each out as a continuation of
    that call, so a chain of re-tokenized replays reads as one conversation; the exact graph still
    has it as a root."""
    parents = rollout.topology.parents
    return {
        m.later: m.earlier
        for m in rollout.near_misses.values()
        if m.kind in (RETOKENIZED, REWRITTEN, COMPACTION)
        and m.node == m.later
        and parents[m.later] is None
        and m.earlier < m.later
    }


def compacted_calls(rollout: Rollout) -> dict[int, int]:
    """Compaction roots -> the call whose history each one summarised (docs/semantics.md,
    "Compactions in the DAG").

    A compaction's near miss names the call it shares its head with (``earlier``: often the first
    call of the conversation, even a discarded first attempt, since the system prompt and task
    are what a compaction keeps). The history it replaced is the conversation as it stood when the
    compaction arrived: the last call before it, not discarded, in ``earlier``'s tree or in the
    tree of a call ``earlier`` was re-sent as (a retry of the first call). Only the trees' exact
    links are read; no ids are compared."""
    parents = rollout.topology.parents
    misses = [
        m
        for m in rollout.near_misses.values()
        if m.kind == COMPACTION and m.node == m.later and parents[m.later] is None and m.earlier < m.later
    ]
    if not misses:
        return {}
    root_of: list[int] = []
    for i, parent in enumerate(parents):
        # a parent arrives before its child (its end ids are the child's prompt head)
        root_of.append(i if parent is None or parent >= i else root_of[parent])
    resent = {  # a discarded root -> the root that re-sent its prompt (Rollout.replaced_by)
        root_of[m.earlier]: root_of[m.later]
        for m in rollout.replaced_by.values()
        if m.kind == RETRY and parents[m.earlier] is None
    }
    discarded = rollout.topology.discarded
    members: dict[int, list[int]] = {}  # root -> its tree's calls, in arrival order
    kept: dict[int, list[int]] = {}  # the same without discarded calls
    for i, root in enumerate(root_of):
        members.setdefault(root, []).append(i)
        if i not in discarded:
            kept.setdefault(root, []).append(i)

    def last_before(lists: dict[int, list[int]], trees: set[int], end: int) -> int | None:
        found = [lst[k - 1] for t in trees if (lst := lists.get(t)) and (k := bisect.bisect_left(lst, end))]
        return max(found) if found else None

    out: dict[int, int] = {}
    for m in misses:
        trees, r = set(), root_of[m.earlier]
        while r not in trees:  # the first call's tree, then the trees it was re-sent as
            trees.add(r)
            r = resent.get(r, r)
        best = last_before(kept, trees, m.later)
        if best is None:
            best = last_before(members, trees, m.later)
        out[m.later] = m.earlier if best is None else best
    for m in sorted(rollout.near_misses.values(), key=lambda m: m.later):  # a compaction re-sent is one too
        if m.kind == RETRY and parents[m.later] is None and m.earlier in out and m.later not in out:
            out[m.later] = out[m.earlier]
    return out
