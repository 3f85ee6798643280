"""Where each call of a rollout's graph is drawn (pure geometry and the drawn view; it never
decides what a call is): the layout the app's DAG, Compare and the HTML bundle all use, so they
lay out the same rollout the same way.

Entry points: ``dag_view(rollout, near_misses=, collapse=, expanded=, focus=, keep=) -> DagView``
(which calls are drawn, which are folded into linear chains, which roots are laid out after the
call they nearly continued, and each drawn call's x (depth) and y (lane)); ``pack(nodes, parent,
length, after, aside)`` (lays out any forest: the first child with the largest subtree continues
its parent's lane, lanes are reused as soon as they are free, a later root starts in the column of
the call that arrived just before it, a compaction one step right of the call it summarised);
``layout(topology)`` (the exact graph); ``subtree`` (what "Focus on its subtree" draws).

Where it sits: an analysis (graph/analysis/), reading the chains (chains.py) and the near misses
the pipeline attached; drawn by the app's DAG and by
graph/reports/bundle.py. Cost: O(N log N).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from rollout_graph.analysis.chains import Chain, compacted_calls, continuations, linear_chains, pinned_calls
from rollout_graph.analysis.chains import collapse as collapse_chains
from rollout_graph.analysis.near_miss import RETRY
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.topology import Topology

GAP = 0.5  # horizontal room kept between two branches sharing a lane


@dataclass(frozen=True, slots=True)
class Layout:
    """Each call's depth and lane in the exact graph."""

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


CHAIN_LENGTH = 3.0  # a collapsed chain is drawn this many steps long


@dataclass(frozen=True, slots=True)
class DagView:
    """What the figure draws: drawn calls with positions, drawn parents, collapsed chains."""

    visible: list[int]
    drawn_parent: dict[int, int | None]
    via: dict[int, Chain]
    chains: list[Chain]
    continued: dict[int, int]  # root -> the call it nearly continued (laid out after it)
    x: dict[int, float]
    y: dict[int, int]
    n_lanes: int


def laid_out_after(rollout: Rollout) -> dict[int, int]:
    """Roots drawn as a continuation of an earlier call (root -> that call): a broken replay after
    the call whose reply it replays, a compaction after the call whose history it summarised
    (``chains.compacted_calls``, not the first call it shares its head with)."""
    return {**continuations(rollout), **compacted_calls(rollout)}


def retries_of_compactions(rollout: Rollout, compacted: Mapping[int, int]) -> dict[int, int]:
    """Discarded roots re-sent as a compaction (a retry of it) -> the call that compaction
    summarised: drawn beside the compaction, after that call."""
    return {
        m.earlier: compacted[m.later]
        for m in rollout.replaced_by.values()
        if m.kind == RETRY and m.later in compacted and rollout.topology.parents[m.earlier] is None
    }


def subtree(rollout: Rollout, node: int, near_misses: bool = True) -> set[int]:
    """``node`` and everything below it: exact descendants, and near-miss continuations."""
    import networkx as nx

    graph = rollout.to_networkx()
    if near_misses:
        ids = rollout.node_ids
        graph.add_edges_from((ids[e], ids[r]) for r, e in laid_out_after(rollout).items())
    names = nx.descendants(graph, rollout.calls[node].node_id) | {rollout.calls[node].node_id}
    return {rollout.index_of(name) for name in names}


def dag_view(
    rollout: Rollout,
    *,
    near_misses: bool = False,
    collapse: bool = True,
    expanded: Collection[int] = (),
    focus: int | None = None,
    keep: Collection[int] = (),
) -> DagView:
    """Which calls are drawn and where (pure). ``collapse``: linear chains drawn as one segment,
    except the chains in ``expanded``; ``focus``: only that call's subtree; ``keep``: calls never
    folded into a chain (search hits, the selection); ``near_misses``: roots laid out after the
    call they nearly continued."""
    topo, n = rollout.topology, len(rollout.calls)
    keep = set(keep) | ({focus} if focus is not None else set())
    compacted = compacted_calls(rollout)  # compaction -> the call it summarised: drawn after it, always
    continued = laid_out_after(rollout) if near_misses else {}  # both ends are pinned (chains.pinned_calls)
    if collapse:
        chains = linear_chains(topo.parents, pinned_calls(rollout, keep), [c.n_prompt for c in rollout.calls])
        # a "chain" of one call is drawn as that call: a bar labelled "1 call" hides it for nothing
        chains = [c for c in chains if len(c.calls) > 1]
        view = collapse_chains(n, topo.parents, chains, expanded)
        visible, drawn, via, folded = view.visible, view.drawn_parent, view.via, view.chains
    else:
        visible, drawn, via, folded = list(range(n)), dict(enumerate(topo.parents)), {}, []
    if focus is not None:
        inside = subtree(rollout, focus, near_misses)
        visible = [v for v in visible if v in inside]
        folded = [c for c in folded if c.before in inside and c.after in inside]
        via = {v: c for v, c in via.items() if v in inside and c.before in inside}
        continued = {r: e for r, e in continued.items() if r in inside and e in inside}
    after = {**compacted, **retries_of_compactions(rollout, compacted)}
    layout_parent = acyclic({v: (continued.get(v) if drawn[v] is None else drawn[v]) for v in visible})
    if focus is not None:
        layout_parent[focus] = None
    length = {v: CHAIN_LENGTH for v in via}
    placed = pack(visible, layout_parent, length, after, aside=topo.discarded)
    return DagView(visible, drawn, via, folded, continued, placed.x, placed.y, placed.n_lanes)


def acyclic(parent: dict[int, int | None]) -> dict[int, int | None]:
    """``parent`` with every cycle cut (the edge that closes it is dropped). Exact parents never
    form one, but near-miss links drawn as edges join trees whose calls arrived out of order."""
    out = dict(parent)
    done: set[int] = set()
    for start in parent:
        path: list[int] = []
        on_path: set[int] = set()
        v: int | None = start
        while v is not None and v in out and v not in done and v not in on_path:
            path.append(v)
            on_path.add(v)
            v = out[v]
        if v is not None and v in on_path:
            out[path[-1]] = None
        done.update(path)
    return out
