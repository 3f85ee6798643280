"""One analysed rollout: calls, links, topology, sequences with roles, and findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from rollout_graph.core.findings import count_by_level
from rollout_graph.core.records import Call, Finding, NearMiss, short
from rollout_graph.core.roles import node_roles
from rollout_graph.core.sequences import Sequence, SequenceTokens, context_start, context_starts, sequence_tokens
from rollout_graph.core.topology import Topology
from rollout_graph.core.types import (
    BROKEN_REPLAYS,
    DISCARDED,
    LEVELS,
    REPLY_CARRIED,
    RETOKENIZED,
    RETRY,
    SPAWNED,
    Kind,
    LinkedBy,
    Role,
)

if TYPE_CHECKING:
    import networkx as nx
    import pandas as pd


@dataclass(repr=False)
class Rollout:
    """One analysed rollout (a session): its calls, links, topology, sequences and findings.

    Calls are indexed by arrival order everywhere (``calls[i]``, ``topology.parents[i]``...).
    Build one with :func:`rollout_graph.load` (or :func:`rollout_graph.analyse` on a loaded session);
    the class holds data, the analyses compute it (rollout_graph.pipeline).

    Attributes:
        session_id: the rollout's id (``session_id`` in the records, or the file name).
        calls: every call, in arrival order.
        topology: parents, children, roots, leaves, forks and discarded retries.
        sequences: one training sequence per leaf (root-to-leaf path), with its role.
        findings: every finding, call-level first, in arrival order.
        trainable: whether each call's sampled span is trained (bool per call).
        linked_by: what linked each call to its parent (``tokens``, ``messages``, ``document``;
            ``None`` for a root).
        near_misses: for each call that broke from an earlier one (a root after the first, a later
            branch of a fork, a replay), the EARLIER call it nearly continued and why, keyed by the
            later call (see docs/semantics.md).
        replaced_by: for a call that looks dropped (discarded, or a leaf), the LATER call that
            re-sent, replayed, rejected, compacted or resumed it, keyed by the earlier call.
        document: what an OpenEnv rollout document said of this rollout, when it came from one.
    """

    session_id: str
    calls: list[Call]
    topology: Topology
    sequences: list[Sequence]
    findings: list[Finding]  # every finding, node-level first, in arrival order
    trainable: np.ndarray  # bool per call
    linked_by: list[LinkedBy | None]
    near_misses: dict[int, NearMiss] = field(default_factory=dict)
    replaced_by: dict[int, NearMiss] = field(default_factory=dict)
    tokenizer: str | None = None  # the tokenizer the near-miss analysis decoded with, if any
    document: dict[str, Any] | None = None
    # The trainer's side once a signals file is joined (a rollout_graph.signals.join.RolloutSignals).
    signals: Any = None
    _index: dict[str, int] = field(default_factory=dict)

    def index_of(self, node_id: str) -> int:
        """Arrival index of the call with ``node_id`` (KeyError if unknown)."""
        if not self._index:
            self._index.update((c.node_id, i) for i, c in enumerate(self.calls))
        return self._index[node_id]

    @property
    def node_ids(self) -> list[str]:
        """Every call's node id, in arrival order."""
        return [c.node_id for c in self.calls]

    def tokens(self, seq: Sequence) -> SequenceTokens:
        """The training tokens of a sequence: input ids, loss mask and logprobs."""
        return sequence_tokens(self.calls, self.topology, self.trainable, seq)

    def context_start(self, node: int) -> int:
        """Where the call's own context starts in its prompt: the length of its parent's end ids."""
        return context_start(self.calls, self.topology, node)

    @cached_property
    def context_starts(self) -> list[int]:
        """:meth:`context_start` of every call, in arrival order."""
        return context_starts(self.calls, self.topology)

    @cached_property
    def node_roles(self) -> list[Role]:
        """The role of every call, in arrival order."""
        return node_roles(len(self.calls), self.topology, self.sequences)

    @cached_property
    def _findings_by_node(self) -> dict[str, list[Finding]]:
        grouped: dict[str, list[Finding]] = {}
        for f in self.findings:
            if f.node_id is not None:
                grouped.setdefault(f.node_id, []).append(f)
        return grouped

    def findings_for(self, node: int) -> list[Finding]:
        """Findings attached to the call at ``node``."""
        return self._findings_by_node.get(self.calls[node].node_id, [])

    @cached_property
    def stats(self) -> dict[str, int]:
        """Counts of calls, roots, forks, discarded calls, leaves and trainable tokens."""
        return {
            "n_calls": len(self.calls),
            "n_turns": len(self.calls),  # deprecated alias of n_calls (docs/cli.md, the JSON contract)
            "n_roots": len(self.topology.roots),
            "n_leaves": len(self.topology.leaves),
            "n_forks": len(self.topology.forks),
            "n_discarded": len(self.topology.discarded),
            "n_sequences": len(self.sequences),
            # the glossary's two counting scopes (docs/semantics.md): "(rows)" sums the training rows, a
            # call in several rows counted in each; "(calls)" counts each call's own tokens once
            "n_trainable_tokens": sum(s.n_trainable for s in self.sequences),  # trainable tokens (rows)
            "n_context_tokens": sum(s.n_context for s in self.sequences),  # context tokens (rows)
            "n_trainable_tokens_in_discarded_rows": sum(s.n_trainable for s in self.sequences if s.role == DISCARDED),
            "n_sampled_tokens": sum(c.n_sampled for c in self.calls),
            **self._call_token_counts,
            # discarded calls the harness re-sent with the same prompt, vs replays of the model's own
            # turn that broke the token prefix (near-miss kinds, graph/analysis/near_miss.py)
            "n_discarded_retries": sum(1 for d in self.topology.discarded if self._discarded_retry(d)),
            "n_broken_replays": sum(1 for m in self.near_misses.values() if m.kind in BROKEN_REPLAYS),
            # unfinished attempts the harness did not continue in text either (a replay chain is one conversation)
            "n_unfinished": sum(len(g) for g in self._unfinished_left),
            "n_retokenized": sum(1 for m in self.near_misses.values() if m.kind == RETOKENIZED),
        }

    @cached_property
    def _call_token_counts(self) -> dict[str, int]:
        """Each call's own tokens counted once: trainable (mask 1), context (mask 0: the prompt tokens
        it adds, and its sampled tokens when it is never trainable), discarded, inherited."""
        trainable = context = discarded = inherited = 0
        flags = self.trainable.tolist() if isinstance(self.trainable, np.ndarray) else list(self.trainable)
        dropped = self.topology.discarded
        for k, (call, start, trained) in enumerate(zip(self.calls, self.context_starts, flags, strict=True)):
            inherited += start
            size, sampled = call.n_prompt, call.n_sampled
            context += size - start
            if trained:
                trainable += sampled
            else:
                context += sampled
            if k in dropped:
                discarded += sampled
        return {
            "n_trainable_call_tokens": trainable,
            "n_context_call_tokens": context,
            "n_discarded_tokens": discarded,
            "n_inherited_tokens": inherited,
        }

    def _discarded_retry(self, d: int) -> bool:
        """A discarded call the harness re-sent, or that re-sent an earlier prompt (or nothing else
        explains: a retry by the exact rules)."""
        replaced, own = self.replaced_by.get(d), self.near_misses.get(d)
        if replaced is None and own is None:
            return True
        return any(m is not None and m.kind == RETRY for m in (replaced, own))

    @cached_property
    def _replayed(self) -> set[int]:
        """Both ends of every broken replay (near-miss kinds ``retokenized``, ``rewritten_continuation``),
        of every spawned subagent (its tool call's arguments are the later prompt) and of every resume
        that carries the earlier reply: calls the harness carried on, never attempts it gave up on."""
        return {
            end
            for m in self.near_misses.values()
            if m.kind in BROKEN_REPLAYS or m.rule == SPAWNED or any(key == REPLY_CARRIED for key, _ in m.facts)
            for end in (m.earlier, m.later)
        }

    @cached_property
    def _unfinished_left(self) -> list[list[int]]:
        """Unfinished attempt groups without the calls a broken replay explains (2+ left)."""
        left = ([m for m in g if m not in self._replayed] for g in self.topology.unfinished)
        return [g for g in left if len(g) > 1]

    @property
    def finding_counts(self) -> dict[str, int]:
        """Number of findings per level (FATAL, WARN, INFO)."""
        return count_by_level(self.findings)

    def __repr__(self) -> str:
        counts = self.finding_counts
        worst = next((f"{level} {counts[level]}" for level in LEVELS if counts.get(level)), "clean")
        return (
            f"Rollout({short(self.session_id)}: {len(self.calls)} calls, {len(self.topology.roots)} roots, "
            f"{len(self.sequences)} sequences, {worst})"
        )

    def kind(self, node: int) -> Kind:
        """Where call ``node`` sits: ``root``, ``fork``, ``leaf`` or ``inner``."""
        return self.topology.kind(node)

    def to_networkx(self, near_misses: bool = False) -> nx.DiGraph:
        """The rollout as a ``networkx.DiGraph`` keyed by node id, edges parent -> child.

        Args:
            near_misses: also add an edge from each call a near-miss call nearly continued, with
                ``linked_by="near_miss"`` and the near-miss ``kind``.

        Returns:
            A DiGraph whose nodes carry ``index``, ``role``, ``kind``, ``discarded``,
            ``n_prompt``, ``n_sampled``, ``finish_reason``, ``model``, ``started_at``,
            ``ended_at`` and ``n_findings``, and whose edges carry ``linked_by``. It writes to
            GraphML as it is (``networkx.write_graphml``): ``None`` values are left out.
        """
        import networkx as nx

        graph = nx.DiGraph(session_id=self.session_id)
        roles = self.node_roles
        for i, call in enumerate(self.calls):
            attrs = {
                "index": i,
                "role": roles[i],
                "kind": self.topology.kind(i),
                "discarded": i in self.topology.discarded,
                "n_prompt": call.n_prompt,
                "n_sampled": call.n_sampled,
                "finish_reason": call.finish_reason,
                "model": call.model,
                "started_at": _timestamp(call.timing.get("started_at")),
                "ended_at": _timestamp(call.timing.get("ended_at")),
                "n_findings": len(self.findings_for(i)),
            }
            graph.add_node(call.node_id, **{k: v for k, v in attrs.items() if v is not None})
        for i, parent in enumerate(self.topology.parents):
            if parent is not None:
                graph.add_edge(self.calls[parent].node_id, self.calls[i].node_id, linked_by=self.linked_by[i])
        if near_misses:
            for i, miss in self.near_misses.items():
                earlier = self.calls[miss.earlier].node_id
                if earlier != self.calls[i].node_id and not graph.has_edge(earlier, self.calls[i].node_id):
                    graph.add_edge(earlier, self.calls[i].node_id, linked_by="near_miss", kind=miss.kind)
        return graph

    def nodes_frame(self) -> pd.DataFrame:
        """One row per call (pandas), in arrival order, ready for ``groupby``.

        Returns:
            A DataFrame with columns node_id, index, parent_id, root_id, role, kind, discarded,
            linked_by, n_prompt, n_sampled, finish_reason, model, started_at, ended_at, and
            n_fatal / n_warn / n_info (findings on the call). Needs pandas (the ``app`` extra).
        """
        import pandas as pd

        topo, roles = self.topology, self.node_roles
        rows = []
        for i, call in enumerate(self.calls):
            parent = topo.parents[i]
            levels = count_by_level(self.findings_for(i))
            rows.append(
                {
                    "node_id": call.node_id,
                    "index": i,
                    "parent_id": None if parent is None else self.calls[parent].node_id,
                    "root_id": self.calls[topo.root_of[i]].node_id,
                    "role": roles[i],
                    "kind": topo.kind(i),
                    "discarded": i in topo.discarded,
                    "linked_by": self.linked_by[i],
                    "n_prompt": call.n_prompt,
                    "n_sampled": call.n_sampled,
                    "finish_reason": call.finish_reason,
                    "model": call.model,
                    "started_at": _timestamp(call.timing.get("started_at")),
                    "ended_at": _timestamp(call.timing.get("ended_at")),
                    "n_fatal": levels["FATAL"],
                    "n_warn": levels["WARN"],
                    "n_info": levels["INFO"],
                }
            )
        return pd.DataFrame(rows, columns=NODE_COLUMNS)

    def sequences_frame(self) -> pd.DataFrame:
        """One row per training sequence (pandas), in leaf order.

        Returns:
            A DataFrame with columns leaf_id, root_id, role, n_nodes, prompt_len, n_trainable,
            n_context. Needs pandas (the ``app`` extra).
        """
        import pandas as pd

        rows = [
            {
                "leaf_id": self.calls[seq.leaf].node_id,
                "root_id": self.calls[seq.nodes[0]].node_id,
                "role": seq.role,
                "n_nodes": len(seq.nodes),
                "prompt_len": seq.prompt_len,
                "n_trainable": seq.n_trainable,
                "n_context": seq.n_context,
            }
            for seq in self.sequences
        ]
        return pd.DataFrame(rows, columns=SEQUENCE_COLUMNS)


NODE_COLUMNS = [
    "node_id", "index", "parent_id", "root_id", "role", "kind", "discarded", "linked_by", "n_prompt", "n_sampled",
    "finish_reason", "model", "started_at", "ended_at", "n_fatal", "n_warn", "n_info",
]  # fmt: skip
SEQUENCE_COLUMNS = ["leaf_id", "root_id", "role", "n_nodes", "prompt_len", "n_trainable", "n_context"]


def _timestamp(value: object) -> float | None:
    """A recorded time as seconds (float), or None when absent or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
