"""Parent of every call: the longest exact token prefix (docs/semantics.md, "Linking").

The rules are written incrementally (each arrival looks for a parent, then adopts late
descendants), but their result is order-free: a call's parent is, among ALL calls, the one whose
end ids are the longest prefix of its prompt, ties going to the earliest arrival. So the fast
implementation computes that directly:

* candidates are sorted by (longer end first, earlier arrival first); the first candidate whose
  end ids really open a prompt wins (hashes and classes only narrow the candidates, never decide);
* a candidate whose end has at least ``_HEAD`` ids can only open prompts with the same first
  ``_HEAD`` ids, so prompts and candidates are split into classes by those ids. A class of few
  prompts and candidates (one conversation, a few retries) checks its pairs by their ids directly;
* in a bigger class (conversations that share a long system prompt) every candidate's end ids get
  a 64-bit polynomial hash and every prompt its prefix hashes (numpy cumsum, wrapping modulo
  2**64, one scheme: ``_terms``), and the candidates no longer than a prompt are compared against
  its prefix hashes at their lengths in one vectorised step; ends shorter than the head are
  matched against every prompt's first ids by hash the same way.

Message fallback (3.3) is arrival-dependent by definition: it looks only at earlier calls.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
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


def _terms(pieces: list[np.ndarray], at: list[int] | None = None) -> np.ndarray:
    """The one hash of the linker: an id sequence hashes to the sum of its ids' terms ``(id + 1) *
    B**position`` (wrapping modulo 2**64), so equal ids give equal hashes whatever their dtype.
    These are the terms of the ids of ``pieces`` end to end, a piece's positions counting from
    ``at[k]`` (from 0 without ``at``). Every hash here is a cumulative sum (prefix hashes) or a
    segment sum (a call's end) of these terms."""
    lengths = [p.shape[0] for p in pieces]
    firsts = [0] * len(pieces) if at is None else at
    powers = _powers_upto(max((a + m for a, m in zip(firsts, lengths, strict=True)), default=0))
    if len(pieces) == 1:
        ids = pieces[0].astype(np.uint64)
        scale = powers[firsts[0] : firsts[0] + lengths[0]]
    else:
        ids = np.concatenate(pieces, dtype=np.uint64, casting="unsafe")
        scale = np.concatenate([powers[a : a + m] for a, m in zip(firsts, lengths, strict=True)])
    with np.errstate(over="ignore"):
        ids += np.uint64(1)
        ids *= scale
    return ids


def prefix_hashes(ids: np.ndarray) -> np.ndarray:
    """``h[k]`` hashes ``ids[:k]``; ``h[0] == 0``. Equal prefixes have equal hashes."""
    flat, _ = _block_prefix_hashes([ids])
    return flat


def _block_prefix_hashes(prompts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The prefix hashes of several prompts in one vectorised pass: ``flat[offsets[k] + m] -
    flat[offsets[k]]`` (wrapping) is ``prefix_hashes(prompts[k])[m]``. ``offsets`` has one more
    entry than ``prompts`` (where the next would start)."""
    offsets = np.zeros(len(prompts) + 1, dtype=np.int64)
    np.cumsum([p.shape[0] for p in prompts], out=offsets[1:])
    flat = np.zeros(int(offsets[-1]) + 1, dtype=np.uint64)
    if flat.shape[0] > 1:
        np.cumsum(_terms(prompts), dtype=np.uint64, out=flat[1:])
    return flat, offsets


def end_is_prefix(candidate: Call, prompt: np.ndarray) -> bool:
    """Exact check that ``candidate``'s end ids open ``prompt``."""
    n_p, n_e = candidate.n_prompt, candidate.n_end
    return (
        candidate.prompt_ids is not None
        and n_e <= prompt.shape[0]
        and same_ids(prompt[:n_p], candidate.prompt_ids)
        and np.array_equal(prompt[n_p:n_e], candidate.sampled_ids)
    )


def _shared_starts(
    calls: list[Call],
) -> tuple[list[tuple[np.ndarray, list[int]]], list[Any], list[int], list[int]]:
    """The calls with prompt ids, grouped by where their prompts start in memory: (the group's
    longest prompt, its members in call order), and each call's start (None without prompt ids),
    prompt length and end length (:attr:`Call.n_prompt`, :attr:`Call.n_end`, read in the same
    pass). Each member's prefix hashes are the longest's cut to its length, so a group is hashed
    once however many prompts it holds."""
    groups: dict[tuple[int, tuple[int, ...], Any], tuple[np.ndarray, list[int]]] = {}
    n = len(calls)
    starts: list[Any] = [None] * n
    n_prompt, n_end = [0] * n, [0] * n
    for i, call in enumerate(calls):
        prompt = call.prompt_ids
        if prompt is None:
            continue
        size = n_prompt[i] = prompt.shape[0]
        n_end[i] = size + call.sampled_ids.shape[0]
        if size == 0:
            continue
        key = starts[i] = start_of(prompt)
        found = groups.get(key)
        if found is None:
            groups[key] = (prompt, [i])
        else:
            found[1].append(i)
            if size > found[0].shape[0]:
                groups[key] = (prompt, found[1])
    return list(groups.values()), starts, n_prompt, n_end


_TAIL_IDS = 1 << 16  # ids of segments hashed in one vectorised step (a few MB of temporaries at most)


def _segment_hashes(pieces: list[np.ndarray], at: list[int]) -> np.ndarray:
    """For each piece ``k``, the hash terms of its ids (positions counting from ``at[k]``) summed:
    a call's end hash is its prompt's hash plus this of its sampled ids at the prompt's length.
    Vectorised over the pieces, a few thousand at a time."""
    out = np.zeros(len(pieces), dtype=np.uint64)
    sizes = [p.shape[0] for p in pieces]
    lo = 0
    while lo < len(pieces):
        hi, total = lo, 0
        while hi < len(pieces) and (hi == lo or total + sizes[hi] <= _TAIL_IDS):
            total += sizes[hi]
            hi += 1
        if total:
            lengths = np.array(sizes[lo:hi], dtype=np.int64)
            first = np.zeros(hi - lo, dtype=np.int64)
            np.cumsum(lengths[:-1], out=first[1:])
            filled = lengths > 0
            terms = _terms(pieces[lo:hi], at[lo:hi])
            out[lo:hi][filled] = np.add.reduceat(terms, first[filled], dtype=np.uint64)
        lo = hi
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


# A candidate whose end has at least _HEAD ids can only open prompts with the same first _HEAD
# ids: calls are split into classes by those ids, and a class of few prompts and candidates
# checks its pairs' ids directly (no hashing), a bigger one filters them by hash first. Ends
# shorter than _HEAD are matched against every prompt's first ids by hash.
_HEAD = 32
_DIRECT_PAIRS = 256  # prompts x candidates of a class checked without hashing


def token_parents(calls: list[Call]) -> list[int | None]:
    """Token links: a call's parent is the call with the longest end ids that open its prompt (earliest on a tie)."""
    n = len(calls)
    parents: list[int | None] = [None] * n
    groups, starts, n_prompt, n_end = _shared_starts(calls)
    candidates = [i for i in range(n) if n_end[i] > 0]
    if not candidates or not groups:
        return parents
    # Longest end first, then earliest arrival: the first verified match is the parent.
    end_len = np.array([n_end[i] for i in candidates], dtype=np.int64)
    ordered = np.array(candidates, dtype=np.int64)[np.lexsort((np.array(candidates), -end_len))].tolist()
    group_of = [-1] * n
    for g, (_, members) in enumerate(groups):
        for i in members:
            group_of[i] = g
    head = _HEAD
    heads = _group_heads([g[0] for g in groups], head)
    # class: the group indices and the candidates (in order) of one head
    classes: dict[bytes, tuple[list[int], list[int]]] = {}
    for g, key in enumerate(heads):
        if key is not None:
            classes.setdefault(key, ([], []))[0].append(g)
    tiny: list[int] = []
    for j in ordered:
        if n_end[j] < head:
            tiny.append(j)
            continue
        g = group_of[j]
        if n_prompt[j] >= head:
            key = heads[g]
        else:  # the head runs into the sampled ids
            call = calls[j]
            assert call.prompt_ids is not None
            opening = np.concatenate(
                (call.prompt_ids, call.sampled_ids[: head - n_prompt[j]]), dtype=np.uint64, casting="unsafe"
            )
            key = _head_key(opening)
        same_head = classes.get(key) if key is not None else None
        if same_head is not None:
            same_head[1].append(j)
    hits: list[list[int]] = [[] for _ in groups]
    for class_groups, class_candidates in classes.values():
        if not class_candidates:
            continue
        prompts = sum(1 for g in class_groups for i in groups[g][1] if n_prompt[i] >= head)
        if prompts * len(class_candidates) <= _DIRECT_PAIRS:
            for g in class_groups:
                hits[g] = class_candidates  # every pair checked by its ids below
        else:
            _hashed_hits(calls, groups, class_groups, class_candidates, n_prompt, n_end, group_of, hits)
    if tiny:
        _tiny_hits(calls, groups, tiny, n_prompt, n_end, hits)
    for g, group_hits in enumerate(hits):
        if not group_hits:
            continue
        neg_hit_len = [-n_end[j] for j in group_hits]
        for i in groups[g][1]:
            prompt = calls[i].prompt_ids
            assert prompt is not None
            size = n_prompt[i]
            for j in group_hits[bisect_left(neg_hit_len, -size) :]:
                n_p = n_prompt[j]
                if n_p >= size:
                    continue
                candidate = calls[j]
                known = candidate.prompt_ids
                assert known is not None  # a hit has prompt ids (its end was hashed)
                # hashes only filter: the ids decide (the prompt part without reading them when
                # both prompts are the same memory)
                if (starts[j] == starts[i] or same_ids(prompt[:n_p], known)) and same_ids(
                    prompt[n_p : n_end[j]], candidate.sampled_ids
                ):
                    parents[i] = j
                    break
    return parents


def _head_key(ids: np.ndarray) -> bytes:
    """The first ids of a prompt or an end as a key: equal ids give equal keys whatever their
    dtype (converted as the hash converts them)."""
    return ids.astype(np.uint64).tobytes()


def _group_heads(longest: list[np.ndarray], head: int) -> list[bytes | None]:
    """Each group's first ``head`` ids as a key (None for a prompt shorter than that)."""
    long = [p[:head] for p in longest if p.shape[0] >= head]
    if not long:
        return [None] * len(longest)
    rows = np.stack(long, dtype=np.uint64, casting="unsafe")
    keys: Iterator[bytes] = iter(rows.view(np.dtype((np.void, 8 * head))).ravel().tolist())  # type: ignore[arg-type]
    return [next(keys) if p.shape[0] >= head else None for p in longest]


def _hashed_hits(
    calls: list[Call],
    groups: list[tuple[np.ndarray, list[int]]],
    class_groups: list[int],
    class_candidates: list[int],
    n_prompt: list[int],
    n_end: list[int],
    group_of: list[int],
    hits: list[list[int]],
) -> None:
    """``hits[g]`` for the groups of one class: the class's candidates (in order) whose end hash is
    the hash of the group's longest prompt cut to the candidate's end length."""
    cand_len = np.array([n_end[j] for j in class_candidates], dtype=np.int64)
    in_class = set(class_groups)
    # end hash = the prompt's hash + the sampled ids' terms. The groups' prefix hashes are made
    # twice (here, then for the prompts), a block of groups at a time, rather than kept: kept,
    # all groups' would be 8 bytes for each id of every group's longest prompt at once.
    cand_hash = _segment_hashes(
        [calls[j].sampled_ids for j in class_candidates], [n_prompt[j] for j in class_candidates]
    )
    outside = [k for k, j in enumerate(class_candidates) if group_of[j] not in in_class]
    if outside:  # a prompt shorter than the head, of a group outside the class: hashed on its own
        prompts = [calls[class_candidates[k]].prompt_ids for k in outside]
        with np.errstate(over="ignore"):
            cand_hash[outside] += _segment_hashes(prompts, [0] * len(outside))  # type: ignore[arg-type]
    place = {j: k for k, j in enumerate(class_candidates)}
    longest = np.array([groups[g][0].shape[0] for g in class_groups], dtype=np.int64)
    blocks = _group_blocks(longest)
    for lo, hi in blocks:
        block = class_groups[lo:hi]
        flat, offsets = _block_prefix_hashes([groups[g][0] for g in block])
        members = [(k, place[i]) for k, g in enumerate(block) for i in groups[g][1] if i in place]
        if members:
            rows = np.array([m[1] for m in members], dtype=np.int64)
            at_ = offsets[np.array([m[0] for m in members], dtype=np.int64)]
            size = np.array([n_prompt[class_candidates[k]] for k in rows.tolist()], dtype=np.int64)
            with np.errstate(over="ignore"):
                cand_hash[rows] += flat[at_ + size] - flat[at_]
    neg_len = -cand_len  # ascending, for searchsorted
    # the candidates a group's prompts may continue: those whose end is no longer than its longest
    firsts = np.searchsorted(neg_len, -longest, side="left").tolist()
    sizes = longest.tolist()
    n_cand = cand_len.shape[0]
    for lo, hi in blocks:
        flat, offsets = _block_prefix_hashes([groups[g][0] for g in class_groups[lo:hi]])
        for k, base in zip(range(lo, hi), offsets.tolist(), strict=False):
            start = firsts[k]
            if start == n_cand:
                continue
            with np.errstate(over="ignore"):
                hashes = flat[base : base + sizes[k] + 1] - flat[base]
            # every member's prefix hashes are the longest's cut to its length: its hash matches
            # are the group's at the end lengths it reaches (a suffix of them: the longest end first)
            found = start + np.flatnonzero(hashes[cand_len[start:]] == cand_hash[start:])
            hits[class_groups[k]] = [class_candidates[m] for m in found.tolist()]


def _tiny_hits(
    calls: list[Call],
    groups: list[tuple[np.ndarray, list[int]]],
    tiny: list[int],
    n_prompt: list[int],
    n_end: list[int],
    hits: list[list[int]],
) -> None:
    """Add to ``hits[g]`` the candidates whose end is shorter than the head (``tiny``, in order)
    and hashes as the group's longest prompt cut to its length."""
    prompts = [calls[j].prompt_ids for j in tiny]
    with np.errstate(over="ignore"):
        end_hash = _segment_hashes(prompts, [0] * len(tiny)) + _segment_hashes(  # type: ignore[arg-type]
            [calls[j].sampled_ids for j in tiny], [n_prompt[j] for j in tiny]
        )
    by_hash: dict[tuple[int, int], list[int]] = {}
    for j, h in zip(tiny, end_hash.tolist(), strict=True):
        by_hash.setdefault((n_end[j], h), []).append(j)
    longest_tiny = max(n_end[j] for j in tiny)
    flat, offsets = _block_prefix_hashes([g[0][:longest_tiny] for g in groups])
    # every (group, length >= 1) prefix hash: flat minus its group's start
    lengths = np.diff(offsets)
    owner = np.repeat(np.arange(len(groups)), lengths)
    with np.errstate(over="ignore"):
        prefix = flat[1:] - flat[offsets[:-1]][owner]
    where = np.flatnonzero(np.isin(prefix, end_hash))
    if not where.shape[0]:
        return
    starts = offsets.tolist()
    added: dict[int, list[int]] = {}
    for at, g, h in zip(where.tolist(), owner[where].tolist(), prefix[where].tolist(), strict=True):
        found = by_hash.get((at - starts[g] + 1, h))
        if found:
            added.setdefault(g, []).extend(found)
    for g, found in added.items():  # the longest end first, then the earliest arrival
        hits[g] = hits[g] + sorted(found, key=lambda j: (-n_end[j], j))


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
