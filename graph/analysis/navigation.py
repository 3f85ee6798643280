"""Moving from call to call: arrival order, parent, first child, siblings (pure).

Siblings are the children of the same parent in arrival order; the roots are siblings of each
other. A move that has nowhere to go returns None (the selection stays).
"""

from __future__ import annotations

from rollout_graph.core.topology import Topology

NEXT, PREVIOUS, PARENT, CHILD, NEXT_SIBLING, PREVIOUS_SIBLING = (
    "next",
    "previous",
    "parent",
    "child",
    "next_sibling",
    "previous_sibling",
)
MOVES = (NEXT, PREVIOUS, PARENT, CHILD, NEXT_SIBLING, PREVIOUS_SIBLING)


def siblings(topology: Topology, node: int) -> list[int]:
    """The calls sharing ``node``'s parent (the roots, for a root), ``node`` included, in arrival order."""
    parent = topology.parents[node]
    return list(topology.roots) if parent is None else list(topology.children[parent])


def step(topology: Topology, node: int | None, move: str) -> int | None:
    """Where ``move`` goes from ``node``; from no selection, every move starts at the first call."""
    n = len(topology.parents)
    if n == 0:
        return None
    if node is None:
        return 0
    if move == NEXT:
        return node + 1 if node + 1 < n else None
    if move == PREVIOUS:
        return node - 1 if node > 0 else None
    if move == PARENT:
        return topology.parents[node]
    if move == CHILD:
        return topology.children[node][0] if topology.children[node] else None
    if move in (NEXT_SIBLING, PREVIOUS_SIBLING):
        group = siblings(topology, node)
        at = group.index(node) + (1 if move == NEXT_SIBLING else -1)
        return group[at] if 0 <= at < len(group) else None
    raise ValueError(f"unknown move {move!r}")
