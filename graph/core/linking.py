"""Parent of every call: the longest exact token prefix (docs/semantics.md, "Linking").

The rules are written incrementally (each arrival looks for a parent, then adopts late
descendants), but their result is order-free: a call's parent is, among ALL calls, the one whose
end ids are the longest prefix of its prompt, ties going to the earliest arrival. So the fast
implementation computes that directly:

* every call's end ids get a 64-bit polynomial hash, and every prompt its prefix hashes (numpy
  cumsum, wrapping modulo 2**64);
* candidates are sorted by (longer end first, earlier arrival first); for a prompt of length L,
  the candidates with end length <= L are compared against the prompt's prefix hashes at their
  lengths in one vectorised step;
* the first hash match whose tokens really are equal wins (hashes only filter, never decide).

Message fallback (3.3) is arrival-dependent by definition: it looks only at earlier calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rollout_graph.core.messages import Turn, canonical, strip_leading_system
from rollout_graph.core.records import Call
from rollout_graph.core.types import BY_MESSAGES, BY_TOKENS, LinkedBy

_BASE = np.uint64(0x9E3779B97F4A7C15)
_powers = np.ones(1, dtype=np.uint64)

TOKENS: LinkedBy = BY_TOKENS
MESSAGES: LinkedBy = BY_MESSAGES


def _powers_upto(n: int) -> np.ndarray:
    global _powers
    if _powers.shape[0] < n:
        size = max(n, 2 * _powers.shape[0])
        grown = np.full(size, _BASE, dtype=np.uint64)
        grown[0] = 1
        with np.errstate(over="ignore"):
            _powers = np.cumprod(grown, dtype=np.uint64)
    return _powers[:n]


def prefix_hashes(ids: np.ndarray) -> np.ndarray:
    """``h[k]`` hashes ``ids[:k]``; ``h[0] == 0``. Equal prefixes have equal hashes."""
    out = np.zeros(ids.shape[0] + 1, dtype=np.uint64)
    if ids.shape[0]:
        with np.errstate(over="ignore"):
            terms = (ids.astype(np.uint64) + np.uint64(1)) * _powers_upto(ids.shape[0])
            np.cumsum(terms, dtype=np.uint64, out=out[1:])
    return out


def _end_hash(call: Call) -> np.uint64:
    assert call.prompt_ids is not None, "only calls with prompt ids have end ids"
    with np.errstate(over="ignore"):
        head = prefix_hashes(call.prompt_ids)[-1]
        tail = (call.sampled_ids.astype(np.uint64) + np.uint64(1)) * _powers_upto(call.n_end)[call.n_prompt :]
        return np.uint64(head + tail.sum(dtype=np.uint64))


def end_is_prefix(candidate: Call, prompt: np.ndarray) -> bool:
    """Exact check that ``candidate``'s end ids open ``prompt``."""
    n_p, n_e = candidate.n_prompt, candidate.n_end
    return (
        candidate.prompt_ids is not None
        and n_e <= prompt.shape[0]
        and np.array_equal(prompt[:n_p], candidate.prompt_ids)
        and np.array_equal(prompt[n_p:n_e], candidate.sampled_ids)
    )


@dataclass(slots=True)
class Links:
    """``parents[i]`` is the arrival index of call i's parent (None for a root)."""

    parents: list[int | None]
    linked_by: list[LinkedBy | None]  # TOKENS, MESSAGES or None (root)


def link(calls: list[Call]) -> Links:
    """Parents of every call and how each link was found: by tokens, else by messages."""
    if len(calls) < 2:  # a lone call is a root (no call links to itself): skip the hashing set-up
        return Links([None] * len(calls), [None] * len(calls))
    parents = token_parents(calls)
    linked_by: list[LinkedBy | None] = [TOKENS if p is not None else None for p in parents]
    for i, parent in message_parents(calls).items():
        parents[i] = parent
        linked_by[i] = MESSAGES
    return Links(parents, linked_by)


def token_parents(calls: list[Call]) -> list[int | None]:
    """Token links: a call's parent is the call with the longest end ids that open its prompt (earliest on a tie)."""
    n = len(calls)
    parents: list[int | None] = [None] * n
    candidates = [i for i, c in enumerate(calls) if c.n_end > 0]
    if not candidates:
        return parents
    end_len = np.array([calls[i].n_end for i in candidates], dtype=np.int64)
    # Longest end first, then earliest arrival: the first verified match is the parent.
    order = np.lexsort((np.array(candidates), -end_len))
    cand_index = np.array(candidates, dtype=np.int64)[order]
    cand_len = end_len[order]
    cand_hash = np.array([_end_hash(calls[i]) for i in cand_index], dtype=np.uint64)
    neg_len = -cand_len  # ascending, for searchsorted
    for i, call in enumerate(calls):
        prompt = call.prompt_ids
        if prompt is None or prompt.shape[0] == 0:
            continue
        size = prompt.shape[0]
        start = int(np.searchsorted(neg_len, -size, side="left"))
        if start == cand_len.shape[0]:
            continue
        hashes = prefix_hashes(prompt)
        hits = np.flatnonzero(hashes[cand_len[start:]] == cand_hash[start:])
        for hit in hits:
            j = int(cand_index[start + hit])
            candidate = calls[j]
            if candidate.n_prompt < size and end_is_prefix(candidate, prompt):
                parents[i] = j
                break
    return parents


def _end_turns(call: Call) -> list[Turn] | None:
    if call.request_messages is None or call.response_message is None:
        return None
    return [canonical(m) for m in call.request_messages] + [canonical(call.response_message, "assistant")]


def message_parents(calls: list[Call]) -> dict[int, int]:
    """Parents for calls without prompt ids, by longest message-list prefix among earlier calls.

    Lengths count the full lists; matching ignores leading system messages on both sides
    (harnesses re-render their system prompt every call).
    """
    parents: dict[int, int] = {}
    needing = [i for i, c in enumerate(calls) if c.prompt_ids is None and c.request_messages is not None]
    if not needing:
        return parents
    # stripped end turns -> [(full end length, arrival index)] of earlier calls
    by_prefix: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    for i, call in enumerate(calls[: needing[-1] + 1]):
        if call.prompt_ids is None and call.request_messages is not None:
            request = [canonical(m) for m in call.request_messages]
            stripped = strip_leading_system(request)
            best: tuple[int, int] | None = None
            for k in range(len(stripped), 0, -1):
                for full_len, j in by_prefix.get(tuple(stripped[:k]), ()):
                    # Longest full list wins; on a tie, the earliest arrival.
                    if full_len <= len(request) and (best is None or (full_len, -j) > (best[0], -best[1])):
                        best = (full_len, j)
            if best is not None:
                parents[i] = best[1]
        end = _end_turns(call)
        if end:
            stripped_end = strip_leading_system(end)
            if stripped_end:
                by_prefix.setdefault(tuple(stripped_end), []).append((len(end), i))
    return parents
