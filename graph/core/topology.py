"""Structure derived from parent links: roots, leaves, forks and discarded retries (docs/semantics.md, "Discarded")."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from rollout_graph.core.records import Call
from rollout_graph.core.types import FORK, INNER, LEAF, ROOT, Kind


@dataclass(slots=True, repr=False)
class Topology:
    """The exact graph's structure, by arrival index (docs/semantics.md: Discarded, Unfinished attempts)."""

    parents: list[int | None]
    children: list[list[int]]
    roots: list[int]
    leaves: list[int]
    forks: list[int]
    root_of: list[int]
    depth: list[int]
    # discarded node -> the sibling that continued (the earliest one with children)
    discarded: dict[int, int]
    # sibling groups none of which continued (attempts the harness gave up on), each by arrival
    unfinished: list[list[int]] = field(default_factory=list)

    def __repr__(self) -> str:
        return (
            f"Topology({len(self.parents)} calls: {len(self.roots)} roots, {len(self.forks)} forks, "
            f"{len(self.leaves)} leaves, {len(self.discarded)} discarded, {len(self.unfinished)} unfinished groups)"
        )

    def kind(self, node: int) -> Kind:
        """Where ``node`` sits: ``root`` (no parent), ``fork`` (2+ children), ``leaf`` or ``inner``."""
        if self.parents[node] is None:
            return ROOT
        if len(self.children[node]) > 1:
            return FORK
        if not self.children[node]:
            return LEAF
        return INNER

    def path_to(self, node: int) -> list[int]:
        """Root -> node, by arrival index."""
        path = [node]
        while (parent := self.parents[path[-1]]) is not None:
            path.append(parent)
        path.reverse()
        return path


def build_topology(calls: list[Call], parents: list[int | None]) -> Topology:
    """Children, roots, leaves, forks, depths, discarded calls and unfinished attempt groups."""
    n = len(calls)
    children: list[list[int]] = [[] for _ in range(n)]
    for child, parent in enumerate(parents):
        if parent is not None:
            children[parent].append(child)
    roots = [i for i in range(n) if parents[i] is None]
    root_of = [0] * n
    depth = [0] * n
    stack = list(reversed(roots))
    for r in roots:
        root_of[r] = r
    while stack:
        node = stack.pop()
        for child in children[node]:
            root_of[child] = root_of[node]
            depth[child] = depth[node] + 1
            stack.append(child)
    forks = [i for i in range(n) if len(children[i]) > 1]
    discarded: dict[int, int] = {}
    unfinished: list[list[int]] = []
    for group in sibling_groups(calls, children, roots, forks):
        continuing = [m for m in group if children[m]]
        if continuing:
            for member in group:
                if not children[member]:
                    discarded[member] = continuing[0]
        elif len({(calls[m].source, calls[m].line) for m in group}) > 1:
            unfinished.append(sorted(group))  # one request's n > 1 choices are samples, not attempts
    return Topology(
        parents=list(parents),
        children=children,
        roots=roots,
        leaves=[i for i in range(n) if not children[i]],
        forks=forks,
        root_of=root_of,
        depth=depth,
        discarded=discarded,
        unfinished=sorted(unfinished),
    )


def sibling_groups(calls: list[Call], children: list[list[int]], roots: list[int], forks: list[int]) -> list[list[int]]:
    """Children of each fork, and roots with identical non-empty prompt ids (a retried first call)."""
    groups = [children[f] for f in forks]
    # Roots bucketed by a hash of their prompt (length and a few ids), then split by exact
    # comparison: no root's prompt is copied into a key (they added up to the size of every root).
    by_print: dict[tuple[int, int], list[tuple[np.ndarray, list[int]]]] = {}
    for r in roots:
        prompt = calls[r].prompt_ids
        if prompt is None or not prompt.shape[0]:
            continue
        same = by_print.setdefault(_fingerprint(prompt), [])
        for first, group in same:
            if np.array_equal(first, prompt):
                group.append(r)
                break
        else:
            same.append((prompt, [r]))
    groups.extend(sorted((g for same in by_print.values() for _, g in same if len(g) > 1), key=lambda g: g[0]))
    return groups


def _fingerprint(ids: np.ndarray) -> tuple[int, int]:
    """(length, hash of the first, middle and last 16 ids as int64): equal prompts, equal prints."""
    n = ids.shape[0]
    return n, hash(ids[_sampled_at(n)].astype(np.int64, copy=False).tobytes())


@lru_cache(maxsize=256)
def _sampled_at(n: int) -> np.ndarray:
    """Where :func:`_fingerprint` samples a prompt of ``n`` ids (one gather instead of three
    slices joined: a thousand roots of one length share it)."""
    mid = n // 2
    parts = (np.arange(min(16, n)), np.arange(max(0, mid - 8), min(n, mid + 8)), np.arange(max(0, n - 16), n))
    at = np.concatenate(parts).astype(np.intp)
    at.flags.writeable = False  # shared by every prompt of this length
    return at
