"""DAG layout in Python (pure geometry: it never decides what a call is): roots on the left,
depth to the right, one lane per branch.

Entry points: ``pack(nodes, parent, length, after, aside)`` lays out any forest given as a parent
map over the drawn nodes (a collapsed chain is a longer edge; a root in ``after``, a compaction,
is drawn one step right of the call it summarised); ``layout(topology)`` is the exact graph.

The first child with the largest subtree continues its parent's lane, so the main line stays
straight; lanes are packed (interval-graph colouring), and later roots start in the column of the
call that arrived just before them, so side conversations sit under the point where they
happened. Cost: O(N log N). Where it sits: called by views/builders/dag/view.py."""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from rollout_graph.core.topology import Topology

GAP = 0.5  # horizontal room kept between two branches sharing a lane


@dataclass(frozen=True, slots=True)
class Layout:
    x: list[int]  # depth
    y: list[int]  # lane (0 at the top)
    n_lanes: int


@dataclass(frozen=True, slots=True)
class Placement:
    """Positions of the drawn nodes (by call index) and the number of lanes used."""

    x: dict[int, float]
    y: dict[int, int]
    n_lanes: int


class _Lanes:
    """Occupied horizontal intervals per lane (non-overlapping, sorted by start)."""

    def __init__(self) -> None:
        self.starts: list[list[float]] = []
        self.ends: list[list[float]] = []

    def free(self, lane: int, a: float, b: float) -> bool:
        if lane >= len(self.starts):
            return True
        starts, ends = self.starts[lane], self.ends[lane]
        k = bisect.bisect_left(starts, a)
        if k < len(starts) and starts[k] <= b + GAP:
            return False
        return not (k > 0 and ends[k - 1] + GAP >= a)

    def take(self, lane: int, a: float, b: float) -> None:
        while lane >= len(self.starts):
            self.starts.append([])
            self.ends.append([])
        k = bisect.bisect_left(self.starts[lane], a)
        self.starts[lane].insert(k, a)
        self.ends[lane].insert(k, b)


def pack(
    nodes: Sequence[int],
    parent_of: Mapping[int, int | None],
    length: Mapping[int, float] | None = None,
    after: Mapping[int, int] | None = None,
    aside: Collection[int] = (),
) -> Placement:
    """Lay out a forest.

    Args:
        nodes: the drawn nodes; roots are taken in this order.
        parent_of: each node's drawn parent (``None`` or a node not drawn: a root).
        length: horizontal length of each node's incoming edge (default 1).
        after: roots drawn one step after a call placed before them (root -> that call), in its
            lane or the first free one below, instead of in the column of the call that arrived
            just before them.
        aside: nodes never chosen to continue their parent's lane over a sibling with as large a
            subtree (discarded calls: the main line goes on through the call that was kept).

    Returns:
        The :class:`Placement`.
    """
    drawn = set(nodes)
    length = length or {}
    after = after or {}
    children: dict[int, list[int]] = {v: [] for v in nodes}
    roots = []
    for v in nodes:
        p = parent_of.get(v)
        if p is None or p not in drawn:
            roots.append(v)
        else:
            children[p].append(v)
    # subtree sizes, children before parents; a root drawn after a call counts in that call's
    # subtree (the conversation goes on through it: a compacted call stays on the main line)
    followers: dict[int, list[int]] = {v: [] for v in nodes}
    following: set[int] = set()
    for root in roots[1:]:
        anchor = after.get(root)
        if anchor is not None and anchor in drawn and anchor < root:
            followers[anchor].append(root)
            following.add(root)
    order: list[int] = []
    stack = [root for root in roots if root not in following]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(children[v])
        stack.extend(followers[v])
    size = dict.fromkeys(nodes, 1)
    for v in reversed(order):
        for c in (*children[v], *followers[v]):
            size[v] += size[c]
    aside = set(aside)
    for v in nodes:
        children[v].sort(key=lambda k: (-size[k], k in aside, k))
    x: dict[int, float] = {}
    y: dict[int, int] = {}
    lanes = _Lanes()
    placed: list[int] = []  # sorted call indices (arrival order) already placed
    bottom = 0
    for n_root, root in enumerate(roots):
        if n_root == 0:
            x[root], pending = 0.0, [(root, -1, 0.0)]
        elif after.get(root) in x:
            # drawn after the call it follows (a compaction after the call it compacted): in that
            # call's lane when it is free from there on (the main line goes on), else below it
            anchor = after[root]
            x[root] = x[anchor] + float(length.get(root, 1))
            pending = [(root, y[anchor] - 1, x[root])]
        else:
            # a later root starts where the call that arrived just before it was drawn, in the
            # first lane free from there on (lanes are reused once their occupant has ended)
            k = bisect.bisect_left(placed, root)
            anchor = placed[k - 1] if k else placed[0]
            x[root] = x[anchor]
            pending = [(root, -1, x[root])]
        while pending:
            first, parent_lane, hang_x = pending.pop()
            # the branch: first node, then main children all the way down
            branch = [first]
            while children[branch[-1]]:
                nxt = children[branch[-1]][0]
                x[nxt] = x[branch[-1]] + float(length.get(nxt, 1))
                branch.append(nxt)
            lane = parent_lane + 1
            while not lanes.free(lane, hang_x, x[branch[-1]]):
                lane += 1
            lanes.take(lane, hang_x, x[branch[-1]])
            bottom = max(bottom, lane)
            later = []
            for v in branch:
                y[v] = lane
                bisect.insort(placed, v)
                for c in children[v][1:]:
                    x[c] = x[v] + float(length.get(c, 1))
                    later.append((c, lane, x[v]))
            # nearest side branches first (a stack: push in reverse)
            pending.extend(reversed(later))
    return Placement(x, y, bottom + 1 if nodes else 0)


def layout(topology: Topology) -> Layout:
    """The exact graph, every call drawn, one unit per edge."""
    n = len(topology.parents)
    placed = pack(range(n), dict(enumerate(topology.parents)))
    return Layout([int(placed.x[i]) for i in range(n)], [placed.y[i] for i in range(n)], placed.n_lanes)
