"""The DAG's view model (pure): which calls are drawn, which are folded into chains, and where.

Entry point: ``dag_view(rollout, near_misses=, collapse=, expanded=, focus=, keep=) -> DagView``.
It asks the library which calls form linear chains (graph/analysis/chains.py) and which roots
nearly continued an earlier call (near misses), then places the drawn calls with the lane packer
(views/builders/layout.py). ``subtree`` is what "Focus on its subtree" draws.

Where it sits: the first step of the figure (views/builders/dag/figure.py); the panel
(views/panels/graph.py) calls ``subtree`` for the focus it keeps. Nothing here knows plotly.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from rollout_graph.analysis.chains import Chain, compacted_calls, continuations, linear_chains, pinned_calls
from rollout_graph.analysis.chains import collapse as collapse_chains
from rollout_graph.analysis.near_miss import RETRY
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import Kind
from rollout_graph.ui.builders.layout import pack

CHAIN_LENGTH = 3.0  # a collapsed chain is drawn this many steps long


def node_kind(rollout: Rollout, i: int) -> Kind:
    """Where call ``i`` sits in the graph (decided in graph/, drawn here)."""
    return rollout.topology.kind(i)


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
