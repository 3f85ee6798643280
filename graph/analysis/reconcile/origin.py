"""Per-position provenance of a slice of a call's prompt, for the rows a framework builds
(docs/reconcile.md, "Provenance").

Reads the exact graph's context origin (rollout_graph.analysis.origin: an ancestor's sampled span
sits in place in its descendants' prompts) and the near misses (read-only): where a call's prompt
replays an earlier reply and breaks inside it (a broken replay), the ids the replay changed are
RETOKENIZED and the ids it kept are the model's own, SAMPLED_AS_CONTEXT. Everything else is CONTEXT.
Entry point: :func:`prompt_codes`, called by ``model.row_tokens`` when a row's arrays are built.
"""

from __future__ import annotations

import numpy as np

from rollout_graph.analysis.near_miss import replay_alignment
from rollout_graph.analysis.origin import HARNESS, context_origin
from rollout_graph.analysis.reconcile.provenance import CONTEXT, RETOKENIZED, SAMPLED_AS_CONTEXT
from rollout_graph.core.rollout import Rollout
from rollout_graph.core.types import BROKEN_REPLAYS


def replayed_spans(rollout: Rollout, node: int) -> list[tuple[int, int, int]]:
    """``(start, stop, code)`` spans of ``node``'s prompt that replay an earlier call's reply after a
    broken replay: the ids the replay changed (RETOKENIZED) and those it kept (SAMPLED_AS_CONTEXT),
    up to where the reply ends in this prompt."""
    out: list[tuple[int, int, int]] = []
    for miss in rollout.near_misses.values():
        if miss.later != node or miss.kind not in BROKEN_REPLAYS or miss.where != "sampled":
            continue
        earlier = rollout.calls[miss.earlier]
        found = replay_alignment(earlier, rollout.calls[node], miss.common_prefix)
        at = miss.common_prefix  # a later-prompt position ...
        sampled_at = miss.common_prefix - earlier.n_prompt  # ... and the earlier sampled index it stands for
        for _, b, c, d in found.segments:
            if c > at:
                out.append((at, c, SAMPLED_AS_CONTEXT))
            if d > c:
                out.append((c, d, RETOKENIZED))
            at, sampled_at = d, b - earlier.n_prompt
        rest = earlier.n_sampled - sampled_at
        if found.synced and rest > 0:
            out.append((at, at + rest, SAMPLED_AS_CONTEXT))
    return out


def prompt_codes(rollout: Rollout, node: int, start: int, stop: int) -> np.ndarray:
    """The provenance code of each position of ``node``'s prompt in ``[start, stop)``."""
    n = rollout.calls[node].n_prompt
    stop = min(stop, n)
    codes = np.full(max(0, stop - start), CONTEXT, dtype=np.int8)
    if stop <= start:
        return codes
    source, _ = context_origin(rollout, node)
    codes[source[start:stop] != HARNESS] = SAMPLED_AS_CONTEXT
    for a, b, code in replayed_spans(rollout, node):
        lo, hi = max(a, start), min(b, stop)
        if lo < hi:
            codes[lo - start : hi - start] = code
    return codes
