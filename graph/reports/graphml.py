"""GraphML export of rollouts (for Gephi, yEd, Cytoscape): the networkx graph of each rollout."""

from __future__ import annotations

from pathlib import Path

import networkx as nx

from rollout_graph.core.rollout import Rollout
from rollout_graph.reports.output import atomic_path


def node_key(session_id: str, node_id: str) -> str:
    """``session/node`` with ``%`` and ``/`` escaped in each part (``%25``, ``%2F``), so two
    different pairs never share a key (``a/b`` + ``c`` is ``a%2Fb/c``; ``a`` + ``b/c`` is ``a/b%2Fc``)."""

    def escape(text: str) -> str:
        return text.replace("%", "%25").replace("/", "%2F")

    return f"{escape(session_id)}/{escape(node_id)}"


def rollouts_graph(rollouts: list[Rollout], near_misses: bool = True) -> nx.DiGraph:
    """One DiGraph holding every rollout.

    Args:
        rollouts: the rollouts to export.
        near_misses: include near-miss edges (``linked_by="near_miss"``).

    Returns:
        With one rollout, its :meth:`Rollout.to_networkx` graph. With several, their union with
        node keys ``session_id/node_id`` (:func:`node_key`: ``%`` and ``/`` escaped in each part)
        and ``session_id`` and ``node_id`` attributes on every node.
    """
    if len(rollouts) == 1:
        return rollouts[0].to_networkx(near_misses=near_misses)
    combined = nx.DiGraph()
    for rollout in rollouts:
        g = rollout.to_networkx(near_misses=near_misses)
        mapping = {n: node_key(rollout.session_id, str(n)) for n in g.nodes}
        for n, attrs in g.nodes(data=True):
            combined.add_node(mapping[n], session_id=rollout.session_id, node_id=n, **attrs)
        for u, v, attrs in g.edges(data=True):
            combined.add_edge(mapping[u], mapping[v], **attrs)
    return combined


def write_graphml(rollouts: list[Rollout], out: str | Path, near_misses: bool = True) -> int:
    """Write the rollouts as GraphML to ``out`` atomically (graph/reports/output.py: a temp file
    renamed on success, with the umask's mode; stale temp files of killed runs removed).

    Returns:
        The number of nodes written.

    Raises:
        rollout_graph.reports.output.OutputError: the output cannot be written.
    """
    graph = rollouts_graph(rollouts, near_misses)
    with atomic_path(Path(out)) as tmp, open(tmp, "wb") as handle:
        nx.write_graphml(graph, handle)
    return graph.number_of_nodes()
