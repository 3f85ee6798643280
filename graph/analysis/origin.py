"""Context origin: for each prompt token of a call, whether the policy sampled it earlier (which
call, at what logprob) or the harness inserted it (tool output, user text, template glue), and,
by text, where the harness re-inserted text the policy had sampled (a summary, a subagent's answer)."""

from __future__ import annotations

import numpy as np

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.near_miss import prompt_of
from rollout_graph.core.rollout import Rollout

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


MIN_REINSERTED_CHARS = 24  # shorter policy texts (an "ok", a file name) match by chance


def _policy_texts(rollout: Rollout, node: int, decoder: Decoder) -> list[tuple[int, str]]:
    """(call, text) for every call that arrived before ``node``: what the policy sampled, decoded
    without special tokens, and the reply the harness parsed from it (its content)."""
    out = []
    for k in range(node):
        call = rollout.calls[k]
        if not call.n_sampled:
            continue
        ids = [i for i in call.sampled_ids.tolist() if not decoder.is_special(i)]
        texts = {decoder.text(ids).strip()}
        reply = call.response_message
        if isinstance(reply, dict) and isinstance(reply.get("content"), str):
            texts.add(reply["content"].strip())
        out += [(k, t) for t in texts if len(t) >= MIN_REINSERTED_CHARS]
    return out


def text_origin(rollout: Rollout, node: int, decoder: Decoder) -> np.ndarray:
    """Per prompt position: the earlier call whose sampled text the harness re-inserted there (a
    compaction summary, a subagent's answer returned as a tool result), or HARNESS.

    Only positions that exact token origin (:func:`context_origin`) credits to the harness are
    considered: where the decoded prompt text contains a call's sampled text (stripped, at least
    ``MIN_REINSERTED_CHARS`` characters), the tokens covering it are credited to that call. The
    longest text wins where two overlap. Needs a decoder that knows the prompt's tokens."""
    call = rollout.calls[node]
    out = np.full(call.n_prompt, HARNESS, dtype=np.int64)
    if not call.n_prompt:
        return out
    source, _ = context_origin(rollout, node)
    pieces = decoder.pieces(prompt_of(call))
    starts = np.cumsum([0] + [len(p) for p in pieces])  # character offset of each token
    text = "".join(pieces)
    for k, sampled in sorted(_policy_texts(rollout, node, decoder), key=lambda kt: -len(kt[1])):
        at = text.find(sampled)
        while at >= 0:
            first = int(np.searchsorted(starts, at, side="right")) - 1
            last = int(np.searchsorted(starts, at + len(sampled), side="left"))
            span = slice(first, min(last, call.n_prompt))
            if (source[span] == HARNESS).all() and (out[span] == HARNESS).all():
                out[span] = k
            at = text.find(sampled, at + len(sampled))
    return out
