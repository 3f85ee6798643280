"""Why a rollout split: for every root after the first, the call it nearly continued and a reason.

Built on the near-miss analysis (graph/near_miss.py), in the words users ask the question with."""

from __future__ import annotations

from dataclasses import dataclass

from graph.analysis.near_miss import COMPACTION, NEW_CONVERSATION, RETRY, REWRITTEN, NearMiss
from graph.core.rollout import Rollout

REASONS = {
    NEW_CONVERSATION: "different system prompt (subagent or auxiliary call)",
    COMPACTION: "rewritten history (compaction or truncation)",
    REWRITTEN: "template drift (the model's output replayed differently: a stop string cut, reasoning dropped, a token merge at the boundary)",
    RETRY: "identical-prompt resample",
}


@dataclass(frozen=True)
class Break:
    """A root after the first: a place where the rollout's token chain broke, with its best near miss."""

    root: int
    miss: NearMiss | None  # None: no other call shares a token with it
    reason: str


def prefix_breaks(rollout: Rollout) -> list[Break]:
    """Every root after the first, with why it starts a new chain (its near miss, if any)."""
    roots = rollout.topology.roots
    out = []
    for root in roots[1:]:
        miss = rollout.near_misses.get(root)
        out.append(Break(root, miss, REASONS[miss.kind if miss is not None else NEW_CONVERSATION]))
    return out
