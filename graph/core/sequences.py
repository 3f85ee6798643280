"""Root-to-leaf training sequences (docs/semantics.md, "Sequences").

Sequences are described by their node path; token arrays are built only on demand because a
rollout's sequences together repeat its context many times over.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollout_graph.core.records import Call, node_path, short
from rollout_graph.core.topology import Topology
from rollout_graph.core.types import AUXILIARY, Role


@dataclass(slots=True, repr=False)
class Sequence:
    """A training sequence: the path from a root to a leaf, with its role."""

    leaf: int
    nodes: list[int]  # arrival indices, root -> leaf
    prompt_len: int
    n_trainable: int
    n_context: int
    role: Role = AUXILIARY  # every sequence gets its role from rollout_graph.core.roles.assign_roles
    root_id: str = ""  # the node ids of its first and last call (for the repr; "" when built by hand)
    leaf_id: str = ""

    @property
    def n_calls(self) -> int:
        """Number of calls on the path."""
        return len(self.nodes)

    @property
    def n_turns(self) -> int:
        """Deprecated alias of :attr:`n_calls`."""
        return len(self.nodes)

    def _path(self) -> str:
        """Root -> leaf by node id when known (``c01 -> … -> c09``), else by arrival index."""
        if not self.leaf_id:
            return node_path(self.nodes)
        if len(self.nodes) == 1:
            return short(self.leaf_id, 30)
        gap = " -> … -> " if len(self.nodes) > 2 else " -> "
        return f"{short(self.root_id, 30)}{gap}{short(self.leaf_id, 30)}"

    def __repr__(self) -> str:
        return (
            f"Sequence({self.role} row {self._path()} ({len(self.nodes)} call{'s' if len(self.nodes) != 1 else ''}): "
            f"{self.n_trainable} trainable + {self.n_context} context tokens)"
        )


@dataclass(frozen=True, slots=True, repr=False)
class SequenceTokens:
    """The arrays a trainer consumes for one sequence."""

    input_ids: np.ndarray
    loss_mask: np.ndarray  # int8, 1 = trained
    logprobs: np.ndarray  # float64, 0.0 wherever the mask is 0
    turn_starts: np.ndarray  # offset where each node's context span begins

    def __repr__(self) -> str:
        return (
            f"SequenceTokens({self.input_ids.shape[0]} tokens, {int(self.loss_mask.sum())} trained, "
            f"{self.turn_starts.shape[0]} calls)"
        )


def context_start(calls: list[Call], topology: Topology, node: int) -> int:
    """Where a node's context span begins in its own prompt: after its parent's end ids."""
    parent = topology.parents[node]
    if parent is None:
        return 0
    return min(calls[parent].n_end, calls[node].n_prompt)


def context_starts(calls: list[Call], topology: Topology) -> list[int]:
    """:func:`context_start` of every call, in arrival order: each call's and its parent's lengths
    read once (the rows, the counts and the JSON contract read them all)."""
    n_prompt = [c.n_prompt for c in calls]
    n_end = [0 if c.prompt_ids is None else p + c.n_sampled for c, p in zip(calls, n_prompt, strict=True)]
    return [
        0 if parent is None else min(n_end[parent], size)
        for parent, size in zip(topology.parents, n_prompt, strict=True)
    ]


def build_sequences(calls: list[Call], topology: Topology, trainable: np.ndarray) -> list[Sequence]:
    """One sequence per leaf, the path from its root, with the sequence's prompt length."""
    sequences = []
    # each call's part of a row (its context and its sampled ids) and its trainable tokens, once
    # per call rather than once per row through it: a call is in every row below it
    n_sampled = [c.n_sampled for c in calls]
    own = [
        c.n_prompt - start + s for c, start, s in zip(calls, context_starts(calls, topology), n_sampled, strict=True)
    ]
    flags = trainable.tolist() if isinstance(trainable, np.ndarray) else list(trainable)
    trained = [s if t else 0 for s, t in zip(n_sampled, flags, strict=False)]
    for leaf in topology.leaves:
        path = topology.path_to(leaf)
        root = calls[path[0]]
        n_trainable = sum(trained[k] for k in path)
        length = sum(own[k] for k in path)
        sequences.append(
            Sequence(
                leaf=leaf,
                nodes=path,
                prompt_len=root.n_prompt,
                n_trainable=int(n_trainable),
                n_context=int(length - n_trainable),
                root_id=root.node_id,
                leaf_id=calls[leaf].node_id,
            )
        )
    return sequences


def sequence_tokens(calls: list[Call], topology: Topology, trainable: np.ndarray, seq: Sequence) -> SequenceTokens:
    """Concatenate a sequence's calls into input ids, loss mask (sampled tokens of trainable calls) and logprobs."""
    ids, mask, lps, starts = [], [], [], []
    offset = 0
    for k in seq.nodes:
        call = calls[k]
        context = call.prompt_ids[context_start(calls, topology, k) :] if call.prompt_ids is not None else None
        starts.append(offset)
        if context is not None and context.shape[0]:
            ids.append(context)
            mask.append(np.zeros(context.shape[0], dtype=np.int8))
            lps.append(np.zeros(context.shape[0], dtype=np.float64))
            offset += context.shape[0]
        n = call.n_sampled
        if n:
            ids.append(call.sampled_ids)
            if trainable[k]:
                assert call.sampled_logprobs is not None, "trainable calls have aligned logprobs"
                mask.append(np.ones(n, dtype=np.int8))
                lps.append(call.sampled_logprobs.astype(np.float64))
            else:
                mask.append(np.zeros(n, dtype=np.int8))
                lps.append(np.zeros(n, dtype=np.float64))
            offset += n
    if not ids:
        empty = np.empty(0)
        return SequenceTokens(empty.astype(np.int64), empty.astype(np.int8), empty, np.array(starts, dtype=np.int64))
    return SequenceTokens(
        input_ids=np.concatenate([a.astype(np.int64) for a in ids]),
        loss_mask=np.concatenate(mask),
        logprobs=np.concatenate(lps),
        turn_starts=np.array(starts, dtype=np.int64),
    )
