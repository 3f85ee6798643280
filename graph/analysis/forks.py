"""Fork and retry diffs: how the children of a fork differ, token by token."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollout_graph.core.rollout import Rollout


@dataclass(frozen=True)
class SiblingDiff:
    """How two children of the same parent differ: where their sampled tokens first diverge."""

    parent: int
    original: int  # the earlier child
    other: int  # a later child (a retry when the prompts are identical)
    continued: int | None  # the sibling that has children, if one does
    same_prompt: bool
    divergence: int | None  # first differing index in the sampled spans (None: identical)
    original_token: int | None
    other_token: int | None
    original_logprob: float | None
    other_logprob: float | None
    other_in_original_top_k: bool | None  # None when no alternatives were recorded there


def _token_and_logprob(call, d: int | None) -> tuple[int | None, float | None]:
    if d is None or d >= call.n_sampled:
        return None, None
    return int(call.sampled_ids[d]), float(call.sampled_logprobs[d]) if call.logprobs_aligned else None


def sibling_diff(rollout: Rollout, parent: int, original: int, other: int) -> SiblingDiff:
    """Compare the sampled spans of two children of ``parent`` (``original`` arrived first)."""
    calls, topo = rollout.calls, rollout.topology
    a, b = calls[original], calls[other]
    n = min(a.n_sampled, b.n_sampled)
    diff = np.flatnonzero(a.sampled_ids[:n] != b.sampled_ids[:n])
    d = int(diff[0]) if diff.size else (n if a.n_sampled != b.n_sampled else None)
    continuing = [c for c in (original, other) if topo.children[c]]
    in_top = None
    if d is not None and d < b.n_sampled and a.top_k is not None and d < a.top_k.ids.shape[0]:
        recorded = a.top_k.ids[d]
        if (recorded >= 0).any():
            in_top = bool((recorded == b.sampled_ids[d]).any())
    a_token, a_logprob = _token_and_logprob(a, d)
    b_token, b_logprob = _token_and_logprob(b, d)
    return SiblingDiff(
        parent=parent,
        original=original,
        other=other,
        continued=continuing[0] if len(continuing) == 1 else None,
        same_prompt=a.prompt_ids is not None
        and b.prompt_ids is not None
        and np.array_equal(a.prompt_ids, b.prompt_ids),
        divergence=d,
        original_token=a_token,
        other_token=b_token,
        original_logprob=a_logprob,
        other_logprob=b_logprob,
        other_in_original_top_k=in_top,
    )


def fork_diffs(rollout: Rollout, fork: int, same_prompt_only: bool = False) -> list[SiblingDiff]:
    """Every later child of a fork against its earliest child; with ``same_prompt_only``, only
    rivals: each later child against the earliest child with an identical prompt."""
    children = sorted(rollout.topology.children[fork])
    if not same_prompt_only:
        return [sibling_diff(rollout, fork, children[0], c) for c in children[1:]]
    groups: dict[bytes, list[int]] = {}
    for c in children:
        prompt = rollout.calls[c].prompt_ids
        if prompt is not None:
            groups.setdefault(prompt.astype(np.int64).tobytes(), []).append(c)
    return [sibling_diff(rollout, fork, g[0], c) for g in groups.values() for c in g[1:]]
