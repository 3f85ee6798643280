"""Context origin: for each prompt token of a call, whether the policy sampled it earlier (which
call, at what logprob) or the harness inserted it (tool output, user text, template glue)."""

from __future__ import annotations

import numpy as np

from graph.core.rollout import Rollout

HARNESS = -1


def _paint_path(rollout: Rollout, last: int, upto: int, source: np.ndarray, logprob: np.ndarray) -> None:
    """Mark the sampled spans on the path root -> ``last`` that fall before ``upto``."""
    for k in rollout.topology.path_to(last):
        call = rollout.calls[k]
        start, stop = call.n_prompt, min(call.n_end, upto)
        if start >= stop:
            continue
        source[start:stop] = k
        if call.logprobs_aligned:
            assert call.sampled_logprobs is not None, "aligned logprobs are never None"
            logprob[start:stop] = call.sampled_logprobs[: stop - start]


def context_origin(rollout: Rollout, node: int) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt position: the call that sampled it (or HARNESS) and the logprob it had then (NaN).

    A child's prompt opens with its ancestors' end ids exactly, so their sampled spans sit at known
    positions. A root's prompt is matched against the call it nearly continued (the near-miss
    analysis) up to where the two diverge.
    """
    call = rollout.calls[node]
    n = call.n_prompt
    source = np.full(n, HARNESS, dtype=np.int64)
    logprob = np.full(n, np.nan)
    parent = rollout.topology.parents[node]
    if parent is not None:
        _paint_path(rollout, parent, n, source, logprob)
    else:
        miss = rollout.near_misses.get(node)
        if miss is not None and miss.later == node:
            _paint_path(rollout, miss.earlier, min(miss.common_prefix, n), source, logprob)
    return source, logprob
