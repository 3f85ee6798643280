"""Rollout groups (GRPO groups): rollouts whose first agent prompt is identical.

The first agent prompt is the prompt of the earliest-arriving root of an agent sequence (the task
as the harness first put it to the model). Token traces compare it by prompt ids; message-only
traces by their messages in canonical form (docs/signals.md); the two never share a group.
Where members diverge is read from their main agent sequences (the row the app opens first).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import orjson

from rollout_graph.core.messages import canonical
from rollout_graph.core.roles import AGENT, main_sequence
from rollout_graph.core.rollout import Rollout


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """The length of the longest common prefix of two id arrays."""
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def first_agent_call(rollout: Rollout) -> int | None:
    """The earliest-arriving root of an agent sequence, if the rollout has one."""
    roots = [s.nodes[0] for s in rollout.sequences if s.role == AGENT and s.nodes]
    return min(roots) if roots else None


def group_key(rollout: Rollout) -> str | None:
    """A digest of the first agent prompt (``ids:`` or ``messages:`` prefixed), or ``None``."""
    node = first_agent_call(rollout)
    if node is None:
        return None
    call = rollout.calls[node]
    if call.prompt_ids is not None:
        digest = hashlib.sha256(np.ascontiguousarray(call.prompt_ids, dtype=np.int64).tobytes()).hexdigest()
        return "ids:" + digest[:16]
    if call.request_messages is None:
        return None
    turns = [canonical(m) for m in call.request_messages if isinstance(m, dict)]
    return "messages:" + hashlib.sha256(orjson.dumps(turns)).hexdigest()[:16]


def main_ids(rollout: Rollout) -> np.ndarray:
    """The input ids of the rollout's main agent sequence (empty without sequences)."""
    if not rollout.sequences:
        return np.empty(0, dtype=np.int64)
    return rollout.tokens(main_sequence(rollout.sequences)).input_ids


@dataclass(frozen=True, slots=True)
class Group:
    """Rollouts sharing a first agent prompt, in the order given, and where they part."""

    key: str
    members: list[str]  # session ids
    prompt_tokens: int  # length of the shared first prompt (0 for message-only traces)
    common_prefix: int  # tokens every member's main sequence shares
    divergence: dict[str, int]  # per member: tokens shared with the first member's main sequence


def rollout_groups(rollouts: list[Rollout]) -> list[Group]:
    """Every group, largest first (ties by first appearance); a rollout alone is a group of one."""
    by_key: dict[str, list[Rollout]] = {}
    for rollout in rollouts:
        key = group_key(rollout)
        if key is not None:
            by_key.setdefault(key, []).append(rollout)
    groups = []
    for key, members in by_key.items():
        ids = [main_ids(r) for r in members]
        shared = {r.session_id: common_prefix(ids[0], x) for r, x in zip(members, ids, strict=True)}
        first = first_agent_call(members[0])
        groups.append(
            Group(
                key=key,
                members=[r.session_id for r in members],
                prompt_tokens=members[0].calls[first].n_prompt if first is not None else 0,
                common_prefix=min(shared.values()),
                divergence=shared,
            )
        )
    order = {key: i for i, key in enumerate(by_key)}
    return sorted(groups, key=lambda g: (-len(g.members), order[g.key]))
