"""DAG layout, computed in Python: roots on the left, depth to the right, one lane per branch.

A chain is a straight line; the first child of a node (the one with the largest subtree, so the
main line stays straight) continues its parent's lane and each other child opens a new lane
below everything laid out so far; each root's tree keeps its lanes together, roots in arrival
order.
"""

from __future__ import annotations

from dataclasses import dataclass

from graph.core.topology import Topology


@dataclass(frozen=True, slots=True)
class Layout:
    x: list[int]  # depth
    y: list[int]  # lane (0 at the top)
    n_lanes: int


def subtree_sizes(topology: Topology) -> list[int]:
    sizes = [1] * len(topology.parents)
    order = []
    stack = list(topology.roots)
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(topology.children[node])
    for node in reversed(order):
        parent = topology.parents[node]
        if parent is not None:
            sizes[parent] += sizes[node]
    return sizes


def layout(topology: Topology) -> Layout:
    n = len(topology.parents)
    sizes = subtree_sizes(topology)
    x, y = [0] * n, [0] * n
    next_lane = 0
    for root in topology.roots:
        y[root] = next_lane
        next_lane += 1
        stack = [root]
        while stack:
            node = stack.pop()
            kids = sorted(topology.children[node], key=lambda k: (-sizes[k], k))
            for rank, child in enumerate(kids):
                x[child] = x[node] + 1
                if rank == 0:
                    y[child] = y[node]
                else:
                    y[child] = next_lane
                    next_lane += 1
            # depth-first, main child last pushed so it is laid out before its siblings' lanes fill
            stack.extend(reversed(kids))
    return Layout(x, y, next_lane)
