"""Where the tokens went: sampled tokens by fate, per rollout and per root, and the least likely
sampled tokens."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import Role


def token_rank(alternatives: np.ndarray, token_id: int) -> tuple[int | None, int]:
    """Where ``token_id`` ranks among one position's recorded alternatives (top-k ids, -1 where
    absent): ``(rank from 1, or None when it is not among them; how many were recorded)``."""
    known = alternatives[alternatives >= 0]
    hits = np.flatnonzero(alternatives == token_id)
    return (int(hits[0]) + 1 if hits.size and known.size else None), int(known.size)


@dataclass(frozen=True)
class Flow:
    """Token counts for a set of calls (a whole rollout, or one root's tree)."""

    label: str
    n_calls: int
    sampled: int  # every sampled token
    sampled_trained: int  # trainable tokens (calls): sampled with mask 1, counted once per call, not per row
    sampled_discarded: int  # discarded tokens: sampled in discarded calls
    sampled_untrainable: int  # sampled but never trainable (no/misaligned logprobs, FATAL): mask 0
    context: int  # context tokens (calls): mask 0 once per call, the prompt tokens it adds + never-trainable sampled
    inherited: int  # inherited tokens: prompt tokens shared with the parent's end ids


@dataclass(frozen=True)
class LowToken:
    """One unlikely sampled token: the call, its position in the sampled span, id and logprob."""

    node: int
    position: int  # index in the call's sampled span
    token_id: int
    logprob: float


def _flow(rollout: Rollout, label: str, nodes: list[int]) -> Flow:
    calls, discarded = rollout.calls, rollout.topology.discarded
    sampled = sum(calls[k].n_sampled for k in nodes)
    trained = sum(calls[k].n_sampled for k in nodes if rollout.trainable[k])
    dropped = sum(calls[k].n_sampled for k in nodes if k in discarded)
    # mask 0, as in the rows: a never-trainable sampled span "stays as context" (docs/semantics.md)
    context = sum(calls[k].n_prompt - rollout.context_start(k) for k in nodes) + sampled - trained
    inherited = sum(rollout.context_start(k) for k in nodes)
    return Flow(label, len(nodes), sampled, trained, dropped, sampled - trained, context, inherited)


def token_flows(rollout: Rollout) -> list[Flow]:
    """The whole rollout first, then one row per root's tree."""
    trees: dict[int, list[int]] = {}
    for k, root in enumerate(rollout.topology.root_of):
        trees.setdefault(root, []).append(k)
    flows = [_flow(rollout, "rollout", list(range(len(rollout.calls))))]
    flows += [_flow(rollout, f"root {rollout.calls[r].node_id}", trees[r]) for r in rollout.topology.roots]
    return flows


def inherited_share(rollout: Rollout, node: int) -> float:
    """Share of the call's prompt that is its parent's end ids (0 for a root)."""
    n = rollout.calls[node].n_prompt
    return rollout.context_start(node) / n if n else 0.0


def logprobs_by_role(rollout: Rollout) -> dict[Role, np.ndarray]:
    """Valid sampled logprobs grouped by the call's role (agent, auxiliary, discarded)."""
    groups: dict[Role, list[np.ndarray]] = {}
    for k, call in enumerate(rollout.calls):
        if call.logprobs_aligned and call.n_sampled:
            assert call.sampled_logprobs is not None, "aligned logprobs are never None"
            values = call.sampled_logprobs[np.isfinite(call.sampled_logprobs)]
            groups.setdefault(rollout.node_roles[k], []).append(values)
    return {role: np.concatenate(parts) for role, parts in groups.items()}


def lowest_tokens(rollout: Rollout, limit: int = 20) -> list[LowToken]:
    """The least likely sampled tokens across the rollout (valid logprobs only), lowest first."""
    found: list[LowToken] = []
    for k, call in enumerate(rollout.calls):
        if not (call.logprobs_aligned and call.n_sampled):
            continue
        assert call.sampled_logprobs is not None, "aligned logprobs are never None"
        lps = np.where(np.isfinite(call.sampled_logprobs), call.sampled_logprobs, np.inf)
        for pos in np.argsort(lps)[:limit].tolist():
            if np.isfinite(lps[pos]):
                found.append(LowToken(k, pos, int(call.sampled_ids[pos]), float(lps[pos])))
    return sorted(found, key=lambda t: (t.logprob, t.node, t.position))[:limit]
