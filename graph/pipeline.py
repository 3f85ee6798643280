"""The composition above core and analysis: load -> link -> analyse, near misses attached.

``rollout_graph.core`` holds the data and the exact-prefix rules; ``rollout_graph.analysis`` computes
what is derived from them. This module is the one place that runs both in order, so neither layer
imports the other's callers (tests/test_layers.py keeps it so).
"""

from __future__ import annotations

import numpy as np

from rollout_graph.analysis.decode import Decoder, TokenizerDecoder
from rollout_graph.analysis.near_miss import near_misses, rewrite_finding
from rollout_graph.core import claims
from rollout_graph.core.findings import is_trainable, rollout_findings, turn_findings
from rollout_graph.core.linking import Links, link
from rollout_graph.core.records import Finding, SessionInput
from rollout_graph.core.roles import assign_roles
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.sequences import build_sequences
from rollout_graph.core.topology import build_topology
from rollout_graph.core.types import BY_DOCUMENT
from rollout_graph.signals.embedded import attach_embedded


def analyse(session: SessionInput, *, links: Links | None = None, decoder: Decoder | None = None) -> Rollout:
    """Link, structure and grade one loaded session.

    Args:
        session: the calls of one rollout as the loader read them.
        links: its calls' links when already known (incremental linking in graph/live keeps
            them up to date); by default they are computed here.
        decoder: a tokenizer lets the near-miss analysis tell a re-tokenized replay
            (graph/analysis/near_miss.py); without one those breaks stay
            ``rewritten_continuation``.

    Returns:
        The analysed :class:`Rollout`.
    """
    calls = session.calls
    links = link(calls) if links is None else links
    parents = links.parents
    claim_findings: list[Finding] = []
    if session.document is not None:
        parents, claim_findings = claims.validated_parents(calls, links.parents)
    topology = build_topology(calls, parents)
    per_node = turn_findings(calls)
    trainable = np.array([is_trainable(c, f) for c, f in zip(calls, per_node, strict=True)], dtype=bool)
    sequences = build_sequences(calls, topology, trainable)
    assign_roles(calls, topology, sequences)
    findings = [f for node in per_node for f in node]
    findings += rollout_findings(calls, topology, sequences, session.document)
    misses = near_misses(calls, topology, decoder)
    rewritten = rewrite_finding(calls, misses, topology.discarded)
    if rewritten is not None:
        findings.append(rewritten)
    findings += claim_findings
    if session.document is not None:
        findings += claims.disagreements(calls, parents, links.parents, sequences, session.document)
    via = [
        BY_DOCUMENT if session.document is not None and c.claims.get("in_sequences") and p is not None else v
        for c, p, v in zip(calls, parents, links.linked_by, strict=True)
    ]
    rollout = Rollout(
        session_id=session.session_id,
        calls=calls,
        topology=topology,
        sequences=sequences,
        findings=findings,
        trainable=trainable,
        linked_by=via,
        near_misses=misses,
        tokenizer=decoder.label if isinstance(decoder, TokenizerDecoder) else None,
        document=session.document,
    )
    # Trainer columns an RL framework wrote beside the tokens join as signals (rollout_graph.signals.embedded).
    return attach_embedded(rollout)
