"""The composition above core and analysis: load -> link -> analyse, near misses attached.

``rollout_graph.core`` holds the data and the exact-prefix rules; ``rollout_graph.analysis`` computes
what is derived from them. This module is the one place that runs both in order, so neither layer
imports the other's callers (tests/project/test_layers.py keeps it so).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rollout_graph.analysis.decode import (
    RAW_IDS,
    TRACE_TEXT,
    Decoder,
    TokenizerDecoder,
    TraceTextDecoder,
    find_tokenizer,
    trace_token_texts,
)
from rollout_graph.analysis.near_miss import (
    near_misses_and_replacements,
    replayed,
    retokenized_finding,
    rewrite_finding,
)
from rollout_graph.core.findings import is_trainable, rollout_findings, turn_findings
from rollout_graph.core.linking import Links, link
from rollout_graph.core.records import Call, Finding, SessionInput
from rollout_graph.core.roles import assign_roles
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.sequences import build_sequences
from rollout_graph.core.topology import Topology, build_topology
from rollout_graph.core.types import BY_DOCUMENT


def analyse(session: SessionInput, *, links: Links | None = None, decoder: Decoder | None = None) -> Rollout:
    """Link, structure and grade one loaded session.

    Args:
        session: the calls of one rollout as the loader read them.
        links: its calls' links when already known (incremental linking in graph/live keeps
            them up to date); by default the session's own (``session.links``: a reopened cache
            entry's) when they are of its calls, else they are computed here.
        decoder: a tokenizer lets the near-miss analysis tell a re-tokenized replay
            (graph/analysis/near_miss.py); without one those breaks stay
            ``rewritten_continuation``.

    Returns:
        The analysed :class:`Rollout`.
    """
    calls = session.calls
    if links is None and session.links is not None and len(session.links.parents) == len(calls):
        links = session.links  # a reopened cache entry's, of these very calls (graph/ingest/load/cache.py)
    links = link(calls) if links is None else links
    parents = links.parents
    claim_findings: list[Finding] = []
    document = session.document
    if document is not None:  # a rollout document's claims (imported only for one: most traces have none)
        from rollout_graph.core import claims

        parents, claim_findings = claims.validated_parents(calls, links.parents)
    topology = build_topology(calls, parents)
    per_node = turn_findings(calls)
    trainable = np.array([is_trainable(c, f) for c, f in zip(calls, per_node, strict=True)], dtype=bool)
    sequences = build_sequences(calls, topology, trainable)
    assign_roles(calls, topology, sequences)
    findings = [f for node in per_node for f in node]
    findings += rollout_findings(calls, topology, sequences, session.document)
    # one call has nothing it nearly continued: the near-miss pass's set-up is most of a small rollout's cost
    misses, replaced = near_misses_and_replacements(calls, topology, decoder) if len(calls) > 1 else ({}, {})
    findings = _unfinished_not_replayed(findings, calls, topology, replayed(misses))
    for finding in (retokenized_finding(calls, misses), rewrite_finding(calls, misses, topology.discarded)):
        if finding is not None:
            findings.append(finding)
    findings += claim_findings
    via = list(links.linked_by)
    if document is not None:
        findings += claims.disagreements(calls, parents, links.parents, sequences, document)
        via = [
            BY_DOCUMENT if c.claims.get("in_sequences") and p is not None else v
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
        replaced_by=replaced,
        tokenizer=decoder.label if isinstance(decoder, TokenizerDecoder) else None,
        document=session.document,
    )
    # Trainer columns an RL framework wrote beside the tokens join as signals (rollout_graph.signals.embedded,
    # imported only for a rollout that carries them: the signals modules cost a start-up otherwise).
    if not any(isinstance(c.claims.get("signals"), dict) for c in calls if c.claims):
        return rollout
    from rollout_graph.signals.embedded import attach_embedded

    return attach_embedded(rollout)


class Decoders:
    """``decoder_for(calls, trace_paths)`` for many rollouts of one load, with the tokenizer search
    (a walk of the folders beside the traces and of the bundled samples) done once per model
    instead of once per rollout: for a file of many small rollouts that walk was most of the time."""

    def __init__(self, trace_paths: Sequence[Path] = ()) -> None:
        self.trace_paths = list(trace_paths)
        self._found: dict[str | None, TokenizerDecoder | None] = {}

    def __call__(self, calls: list[Call]) -> Decoder:
        """The decoder :func:`rollout_graph.analysis.decode.decoder_for` would choose for these calls."""
        model = next((c.model for c in calls if c.model), None)
        if model not in self._found:
            self._found[model] = find_tokenizer(model, self.trace_paths)
        found = self._found[model]
        if found is not None:
            return found
        known = trace_token_texts(calls)
        return TraceTextDecoder(known, TRACE_TEXT if known else RAW_IDS)


def _unfinished_not_replayed(
    findings: list[Finding], calls: list[Call], topology: Topology, replays: set[int]
) -> list[Finding]:
    """An unfinished-attempt group whose members the harness replayed in text (a chain of broken
    replays: graph/analysis/near_miss.py) is one conversation, not attempts it gave up on: the
    finding names only the members no replay explains (none left: no finding). The graph's
    ``unfinished`` groups stay the exact-prefix rule."""
    if not replays:
        return findings
    groups = {calls[g[0]].node_id: g for g in topology.unfinished}
    out = []
    for f in findings:
        group = groups.get(f.node_id or "") if f.code == "unfinished_attempts" else None
        if group is not None:
            left = [m for m in group if m not in replays]
            if len(left) == len(group):
                pass
            elif len(left) < 2:
                continue
            else:
                names = ", ".join(calls[m].node_id for m in left)
                f = Finding(
                    f.level,
                    f.code,
                    f"{len(left)} sibling attempts and none continued ({names}): the harness gave up on them, "
                    "yet each is a training row (export --drop-unfinished leaves them out)",
                    node_id=calls[left[0]].node_id,
                )
        out.append(f)
    return out
