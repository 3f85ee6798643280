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

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollout_graph.core.ids import same_ids, start_of
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


def end_is_prefix(candidate: Call, prompt: np.ndarray) -> bool:
    """Exact check that ``candidate``'s end ids open ``prompt``."""
    n_p, n_e = candidate.n_prompt, candidate.n_end
    return (
        candidate.prompt_ids is not None
        and n_e <= prompt.shape[0]
        and same_ids(prompt[:n_p], candidate.prompt_ids)
        and np.array_equal(prompt[n_p:n_e], candidate.sampled_ids)
    )


def _shared_starts(calls: list[Call]) -> tuple[list[tuple[np.ndarray, list[int]]], list[Any]]:
    """The calls with prompt ids, grouped by where their prompts start in memory: (the group's
    longest prompt, its members in call order), and each call's start (None without prompt ids).
    Each member's prefix hashes are the longest's cut to its length, so a group is hashed once
    however many prompts it holds."""
    groups: dict[tuple[int, tuple[int, ...], Any], tuple[np.ndarray, list[int]]] = {}
    starts: list[Any] = [None] * len(calls)
    for i, call in enumerate(calls):
        prompt = call.prompt_ids
        if prompt is None or prompt.shape[0] == 0:
            continue
        key = starts[i] = start_of(prompt)
        found = groups.get(key)
        if found is None:
            groups[key] = (prompt, [i])
        else:
            found[1].append(i)
            if prompt.shape[0] > found[0].shape[0]:
                groups[key] = (prompt, found[1])
    return list(groups.values()), starts


_TAIL_IDS = 1 << 16  # sampled ids hashed in one vectorised step (a few MB of temporaries at most)


def _tail_hashes(calls: list[Call], nodes: list[int], n_prompt: list[int]) -> np.ndarray:
    """For each call of ``nodes``, the hash terms of its sampled ids (at their positions in its end
    ids) summed: its end hash is its prompt's hash plus this. Vectorised over the calls, a few
    thousand calls' sampled ids at a time."""
    out = np.zeros(len(nodes), dtype=np.uint64)
    lo = 0
    while lo < len(nodes):
        hi, total = lo, 0
        while hi < len(nodes) and (hi == lo or total + calls[nodes[hi]].sampled_ids.shape[0] <= _TAIL_IDS):
            total += calls[nodes[hi]].sampled_ids.shape[0]
            hi += 1
        out[lo:hi] = _tail_block(calls, nodes[lo:hi], n_prompt)
        lo = hi
    return out


def _tail_block(calls: list[Call], nodes: list[int], n_prompt: list[int]) -> np.ndarray:
    sampled = [calls[i].sampled_ids for i in nodes]
    lengths = np.array([s.shape[0] for s in sampled], dtype=np.int64)
    out = np.zeros(len(nodes), dtype=np.uint64)
    total = int(lengths.sum())
    if total == 0:
        return out
    first = np.zeros(len(nodes), dtype=np.int64)
    np.cumsum(lengths[:-1], out=first[1:])
    heads = np.array([n_prompt[i] for i in nodes], dtype=np.int64)
    # each sampled id's position in its call's end ids: the prompt's length, then 0, 1, 2, ...
    position = np.arange(total, dtype=np.int64) + np.repeat(heads - first, lengths)
    powers = _powers_upto(int((heads + lengths).max()))
    with np.errstate(over="ignore"):
        terms = (np.concatenate(sampled).astype(np.uint64) + np.uint64(1)) * powers[position]
        filled = lengths > 0
        out[filled] = np.add.reduceat(terms, first[filled], dtype=np.uint64)
    return out


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
    n_prompt = [c.n_prompt for c in calls]
    n_end = [0 if c.prompt_ids is None else n_prompt[i] + c.n_sampled for i, c in enumerate(calls)]
    candidates = [i for i in range(n) if n_end[i] > 0]
    if not candidates:
        return parents
    end_len = np.array([n_end[i] for i in candidates], dtype=np.int64)
    # Longest end first, then earliest arrival: the first verified match is the parent.
    order = np.lexsort((np.array(candidates), -end_len))
    cand_index = np.array(candidates, dtype=np.int64)[order]
    cand_len = end_len[order]
    groups, starts = _shared_starts(calls)
    # end hash = the prompt's hash + the sampled ids' terms. The groups' prefix hashes are made
    # twice (here, then for the prompts), a block of groups at a time, rather than kept: kept,
    # all groups' would be 8 bytes for each id of every group's longest prompt at once.
    end_hash = np.zeros(n, dtype=np.uint64)
    end_hash[candidates] = _tail_hashes(calls, candidates, n_prompt)
    longest = np.array([g[0].shape[0] for g in groups], dtype=np.int64)
    neg_len = -cand_len  # ascending, for searchsorted
    # the candidates a group's prompts may continue: those whose end is no longer than its longest
    first = np.searchsorted(neg_len, -longest, side="left")
    blocks = _group_blocks(longest)
    for lo, hi in blocks:
        flat, offsets = _block_prefix_hashes([g[0] for g in groups[lo:hi]])
        members = [i for g in groups[lo:hi] for i in g[1]]
        at = np.repeat(offsets[:-1], [len(g[1]) for g in groups[lo:hi]])
        with np.errstate(over="ignore"):
            end_hash[members] += flat[at + np.array([n_prompt[i] for i in members], dtype=np.int64)] - flat[at]
    cand_hash = end_hash[cand_index]
    n_cand = cand_len.shape[0]
    firsts, sizes = first.tolist(), longest.tolist()
    for lo, hi in blocks:
        flat, offsets = _block_prefix_hashes([g[0] for g in groups[lo:hi]])
        for g, base in zip(range(lo, hi), offsets.tolist(), strict=False):
            start = firsts[g]
            if start == n_cand:
                continue
            with np.errstate(over="ignore"):
                hashes = flat[base : base + sizes[g] + 1] - flat[base]
            # every member's prefix hashes are the longest's cut to its length: its hash matches
            # are the group's at the end lengths it reaches (a suffix of them: the longest end first)
            hits = start + np.flatnonzero(hashes[cand_len[start:]] == cand_hash[start:])
            if not hits.shape[0]:
                continue
            neg_hit_len = neg_len[hits].tolist()
            hit_nodes = cand_index[hits].tolist()
            for i in groups[g][1]:
                prompt = calls[i].prompt_ids
                assert prompt is not None
                size = n_prompt[i]
                for j in hit_nodes[bisect_left(neg_hit_len, -size) :]:
                    n_p = n_prompt[j]
                    if n_p >= size:
                        continue
                    candidate = calls[j]
                    # hashes only filter: the ids decide (the prompt part without reading them
                    # when both prompts are the same memory)
                    if (starts[j] == starts[i] or _equal(prompt[:n_p], candidate.prompt_ids)) and _equal(
                        prompt[n_p : n_end[j]], candidate.sampled_ids
                    ):
                        parents[i] = j
                        break
    return parents


def _equal(a: np.ndarray, b: Any) -> bool:
    """``np.array_equal(a, b)`` for two 1-d arrays, without its conversions."""
    return a.shape == b.shape and bool((a == b).all())


_BLOCK_IDS = (
    1 << 13
)  # prompt ids hashed in one vectorised step (temporaries of 64 KB: no more than one longer prompt makes)


def _group_blocks(longest: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive runs of groups, each as many as fit ``_BLOCK_IDS`` prompt ids (at least one)."""
    sizes = longest.tolist()
    out = []
    lo = 0
    while lo < len(sizes):
        hi, ids = lo + 1, sizes[lo]
        while hi < len(sizes) and ids + sizes[hi] <= _BLOCK_IDS:
            ids += sizes[hi]
            hi += 1
        out.append((lo, hi))
        lo = hi
    return out


def _block_prefix_hashes(prompts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The prefix hashes of several prompts in one vectorised pass: ``flat[offsets[k] + m] -
    flat[offsets[k]]`` (wrapping) is ``prefix_hashes(prompts[k])[m]``. ``offsets`` has one more
    entry than ``prompts`` (where the next would start)."""
    lengths = [p.shape[0] for p in prompts]
    offsets = np.zeros(len(prompts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    flat = np.zeros(total + 1, dtype=np.uint64)
    if total:
        powers = _powers_upto(max(lengths))
        ids = (
            np.concatenate(prompts, dtype=np.uint64, casting="unsafe")
            if len(prompts) > 1
            else prompts[0].astype(np.uint64)
        )
        scale = np.concatenate([powers[:m] for m in lengths]) if len(prompts) > 1 else powers
        with np.errstate(over="ignore"):
            ids += np.uint64(1)
            ids *= scale
            np.cumsum(ids, dtype=np.uint64, out=flat[1:])
    return flat, offsets


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
