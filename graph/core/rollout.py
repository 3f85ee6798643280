"""One analysed rollout: calls, links, topology, sequences with roles, and findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from graph.analysis.near_miss import NearMiss, near_misses, rewrite_finding
from graph.core import claims
from graph.core.findings import count_by_level, is_trainable, rollout_findings, turn_findings
from graph.core.linking import link
from graph.core.records import Call, Finding, SessionInput
from graph.core.roles import assign_roles, node_roles
from graph.core.sequences import Sequence, SequenceTokens, build_sequences, context_start, sequence_tokens
from graph.core.topology import Topology, build_topology


@dataclass
class Rollout:
    session_id: str
    calls: list[Call]
    topology: Topology
    sequences: list[Sequence]
    findings: list[Finding]  # every finding, node-level first, in arrival order
    trainable: np.ndarray  # bool per call
    link_via: list[str | None]
    near_misses: dict[int, NearMiss] = field(default_factory=dict)
    document: dict | None = None
    # The trainer's side once a signals file is joined (a graph.signals.join.RolloutSignals).
    signals: Any = None
    _index: dict[str, int] = field(default_factory=dict)

    def index_of(self, node_id: str) -> int:
        if not self._index:
            self._index.update((c.node_id, i) for i, c in enumerate(self.calls))
        return self._index[node_id]

    @property
    def node_ids(self) -> list[str]:
        """Every call's node id, in arrival order."""
        return [c.node_id for c in self.calls]

    def tokens(self, seq: Sequence) -> SequenceTokens:
        return sequence_tokens(self.calls, self.topology, self.trainable, seq)

    def context_start(self, node: int) -> int:
        return context_start(self.calls, self.topology, node)

    @cached_property
    def node_roles(self) -> list[str]:
        return node_roles(len(self.calls), self.topology, self.sequences)

    @cached_property
    def _findings_by_node(self) -> dict[str, list[Finding]]:
        grouped: dict[str, list[Finding]] = {}
        for f in self.findings:
            if f.node_id is not None:
                grouped.setdefault(f.node_id, []).append(f)
        return grouped

    def findings_for(self, node: int) -> list[Finding]:
        return self._findings_by_node.get(self.calls[node].node_id, [])

    @cached_property
    def stats(self) -> dict[str, int]:
        return {
            "n_turns": len(self.calls),
            "n_roots": len(self.topology.roots),
            "n_leaves": len(self.topology.leaves),
            "n_forks": len(self.topology.forks),
            "n_discarded": len(self.topology.discarded),
            "n_sequences": len(self.sequences),
            "n_trainable_tokens": sum(s.n_trainable for s in self.sequences),
            "n_context_tokens": sum(s.n_context for s in self.sequences),
            "n_sampled_tokens": sum(c.n_sampled for c in self.calls),
        }

    @property
    def finding_counts(self) -> dict[str, int]:
        return count_by_level(self.findings)


def analyse(session: SessionInput) -> Rollout:
    calls = session.calls
    links = link(calls)
    parents = links.parents
    if session.document is not None:
        parents = claims.claimed_parents(calls, links.parents)
    topology = build_topology(calls, parents)
    per_node = turn_findings(calls)
    trainable = np.array([is_trainable(c, f) for c, f in zip(calls, per_node)], dtype=bool)
    sequences = build_sequences(calls, topology, trainable)
    assign_roles(calls, topology, sequences)
    findings = [f for node in per_node for f in node]
    findings += rollout_findings(calls, topology, sequences, session.document)
    misses = near_misses(calls, topology.parents, topology.discarded)
    rewritten = rewrite_finding(calls, misses, topology.discarded)
    if rewritten is not None:
        findings.append(rewritten)
    if session.document is not None:
        findings += claims.disagreements(calls, parents, links.parents, sequences, session.document)
    via = [
        "document" if session.document is not None and c.claims.get("in_sequences") and p is not None else v
        for c, p, v in zip(calls, parents, links.via)
    ]
    return Rollout(
        session_id=session.session_id,
        calls=calls,
        topology=topology,
        sequences=sequences,
        findings=findings,
        trainable=trainable,
        link_via=via,
        near_misses=misses,
        document=session.document,
    )
