"""GraphML export of rollouts (for Gephi, yEd, Cytoscape): the networkx graph of each rollout."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import networkx as nx

from rollout_graph.core.rollout import Rollout


def rollouts_graph(rollouts: list[Rollout], near_misses: bool = True) -> nx.DiGraph:
    """One DiGraph holding every rollout.

    Args:
        rollouts: the rollouts to export.
        near_misses: include near-miss edges (``linked_by="near_miss"``).

    Returns:
        With one rollout, its :meth:`Rollout.to_networkx` graph. With several, their union with
        node keys ``session_id/node_id`` and a ``session_id`` attribute on every node.
    """
    if len(rollouts) == 1:
        return rollouts[0].to_networkx(near_misses=near_misses)
    combined = nx.DiGraph()
    for rollout in rollouts:
        g = rollout.to_networkx(near_misses=near_misses)
        mapping = {n: f"{rollout.session_id}/{n}" for n in g.nodes}
        for n, attrs in g.nodes(data=True):
            combined.add_node(mapping[n], session_id=rollout.session_id, node_id=n, **attrs)
        for u, v, attrs in g.edges(data=True):
            combined.add_edge(mapping[u], mapping[v], **attrs)
    return combined


def write_graphml(rollouts: list[Rollout], out: str | Path, near_misses: bool = True) -> int:
    """Write the rollouts as GraphML to ``out`` atomically (a temp file renamed on success).

    Returns:
        The number of nodes written.
    """
    graph = rollouts_graph(rollouts, near_misses)
    target = Path(out)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as handle:
            nx.write_graphml(graph, handle)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return graph.number_of_nodes()
