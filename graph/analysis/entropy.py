"""A lower bound on the sampling distribution's entropy from the recorded top-k alternatives.

With the recorded alternatives' probabilities ``p_1 >= ... >= p_k`` (the top k of the
distribution the engine sampled from) and the unrecorded mass ``r = 1 - sum(p_i)``:

    H >= -sum(p_i log p_i) + r * (-log p_k)

because every unrecorded token has probability at most ``p_k``, so each contributes at least
``p_j * (-log p_k)``. It is a lower bound, never an estimate of the full entropy: with few
alternatives recorded the true entropy can be much higher (docs/signals.md).
"""

from __future__ import annotations

import numpy as np

from rollout_graph.core.records import TopK


def entropy_lower_bound(top_k: TopK | None, n_sampled: int) -> np.ndarray:
    """Per sampled position, the bound in nats; NaN where nothing was recorded."""
    out = np.full(n_sampled, np.nan)
    if top_k is None or top_k.logprobs.size == 0:
        return out
    lps = np.asarray(top_k.logprobs[:n_sampled], dtype=np.float64)
    # a recorded alternative is one with a finite logprob
    known = np.isfinite(lps)
    probs = np.where(known, np.exp(np.where(known, lps, 0.0)), 0.0)
    probs = np.minimum(probs, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(probs > 0, -probs * np.log(np.where(probs > 0, probs, 1.0)), 0.0)
    rest = np.clip(1.0 - probs.sum(axis=1), 0.0, 1.0)
    smallest = np.where(known, probs, np.inf).min(axis=1)
    tail = np.where(np.isfinite(smallest) & (smallest > 0), rest * -np.log(np.where(smallest > 0, smallest, 1.0)), 0.0)
    bound = terms.sum(axis=1) + tail
    out[: lps.shape[0]] = np.where(known.any(axis=1), bound, np.nan)
    return out
