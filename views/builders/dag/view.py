"""The DAG's view model: which calls are drawn and where. It lives in the library
(rollout_graph.analysis.layout), so the app's DAG, Compare and the HTML bundle lay a rollout out
the same way; this module names it for the DAG builders.

Entry points: ``dag_view``, ``DagView``, ``subtree``, ``laid_out_after``, ``acyclic``,
``CHAIN_LENGTH``; ``node_kind(rollout, i)`` (where a call sits: root, fork, leaf, inner).

Where it sits: the first step of the figure (views/builders/dag/figure.py).
"""

from __future__ import annotations

from rollout_graph.analysis.layout import (
    CHAIN_LENGTH,
    DagView,
    acyclic,
    dag_view,
    laid_out_after,
    retries_of_compactions,
    subtree,
)
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import Kind

__all__ = [
    "CHAIN_LENGTH", "DagView", "acyclic", "dag_view", "laid_out_after", "node_kind", "retries_of_compactions", "subtree",
]  # fmt: skip


def node_kind(rollout: Rollout, i: int) -> Kind:
    """Where call ``i`` sits in the graph (decided in graph/, drawn here)."""
    return rollout.topology.kind(i)
