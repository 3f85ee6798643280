"""Near-miss links: why a call did not continue the call it nearly continued.

Exact prefix linking is right for training data, but harnesses rewrite history before replaying it
(a stop string cut from the model's output, a closing tag appended, reasoning dropped, tool-call JSON
re-serialised), and then each step becomes a new root or makes the previous step look like a
discarded retry. For every root after the first and every discarded call this finds the call it
nearly continued, where the token prefix broke, and what kind of break it was. It never changes the
exact graph, its sequences or exports.

Thresholds (docs/semantics.md):
- ``retry``: the two prompts are identical, or within ``NEAR_IDENTICAL`` of each other in length
  and shared prefix: the same request sampled again.
- ``rewritten_continuation``: the break falls inside or at the end of the earlier call's sampled
  span, the later prompt goes on past it, and either at least ``MOSTLY_KEPT`` of the sampled tokens
  were kept before the break or the sampled span's last tokens (its last third, 3 to
  ``TAIL_TOKENS`` of them) reappear within ``TAIL_WINDOW`` tokens after it (the harness edited the
  model's output in the middle: dropped its reasoning, re-serialised a tool call).
- ``compaction``: the break falls inside the earlier call's prompt but after a shared system prompt
  (the same first system message, or without messages at least ``SHARED_SYSTEM_TOKENS`` tokens).
- ``new_conversation``: anything else (a short shared prefix: subagent, title, auxiliary call).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from graph.core.records import WARN, Call, Finding

RETRY = "retry"
REWRITTEN = "rewritten_continuation"
COMPACTION = "compaction"
NEW_CONVERSATION = "new_conversation"

NEAR_IDENTICAL = 0.98
MOSTLY_KEPT = 0.5
SHARED_SYSTEM_TOKENS = 32
TAIL_TOKENS = 8  # at most this many of the sampled span's last tokens (a third of it) are looked for after the break
MIN_TAIL_TOKENS = 3
TAIL_WINDOW = 64  # how far past the break they may reappear


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A call that nearly continued another: the longest shared prefix with its end ids, and its kind."""

    node: int  # the call this explains (a root after the first, or a discarded call)
    other: int  # the call it is compared with: the candidate it nearly continued, or the sibling that continued
    earlier: int  # whose end ids are compared ...
    later: int  # ... with whose prompt ids
    common_prefix: int
    kept: float  # share of the earlier call's sampled tokens kept before the break
    where: str  # the break falls in the earlier call's "prompt", "sampled" span, or "after" it
    kind: str


def _prompt(call: Call) -> np.ndarray:
    """The prompt ids of a call that carries them (near misses only compare such calls)."""
    assert call.prompt_ids is not None, f"call {call.node_id!r} has no prompt ids"
    return call.prompt_ids


def common_prefix(earlier: Call, prompt: np.ndarray) -> int:
    """Length of the common prefix of ``earlier``'s end ids and ``prompt``."""
    n_p = min(earlier.n_prompt, prompt.shape[0])
    diff = np.flatnonzero(_prompt(earlier)[:n_p] != prompt[:n_p])
    if diff.size:
        return int(diff[0])
    if n_p < earlier.n_prompt:
        return n_p
    rest = min(earlier.n_sampled, prompt.shape[0] - n_p)
    diff = np.flatnonzero(earlier.sampled_ids[:rest] != prompt[n_p : n_p + rest])
    return n_p + (int(diff[0]) if diff.size else rest)


def _system(call: Call) -> str | None:
    messages = call.request_messages or []
    first = messages[0] if messages else {}
    return first.get("content") if first.get("role") in ("system", "developer") else None


def _tail_reappears(earlier: Call, later: Call, at: int) -> bool:
    k = min(TAIL_TOKENS, earlier.n_sampled // 3)
    if k < MIN_TAIL_TOKENS:
        return False
    tail = earlier.sampled_ids[-k:]
    window = _prompt(later)[at : at + earlier.n_sampled + TAIL_WINDOW]
    if window.shape[0] < k:
        return False
    runs = np.lib.stride_tricks.sliding_window_view(window, k)
    return bool((runs == tail).all(axis=1).any())


def classify(earlier: Call, later: Call, shared: int) -> tuple[str, str, float]:
    """(kind, where, kept) for ``later``'s prompt against ``earlier``'s end ids."""
    p_e, n_e, n_l = earlier.n_prompt, earlier.n_end, later.n_prompt
    where = "prompt" if shared < p_e else "sampled" if shared < n_e else "after"
    kept = min(1.0, max(0.0, (shared - p_e) / earlier.n_sampled)) if earlier.n_sampled else 0.0
    longest = max(n_l, p_e)
    if np.array_equal(_prompt(earlier), _prompt(later)) or (
        min(n_l, p_e) >= NEAR_IDENTICAL * longest and min(shared, p_e) >= NEAR_IDENTICAL * longest
    ):
        return RETRY, where, kept
    if where != "prompt" and n_l > p_e and (kept >= MOSTLY_KEPT or _tail_reappears(earlier, later, shared)):
        return REWRITTEN, where, kept
    systems = _system(earlier), _system(later)
    same_system = systems[0] == systems[1] if None not in systems else shared >= SHARED_SYSTEM_TOKENS
    if same_system and shared > 0:
        return COMPACTION, where, kept
    return NEW_CONVERSATION, where, kept


def _key(ids: np.ndarray, wide: bool) -> bytes:
    """Big-endian bytes: their lexicographic order is the order of the id sequences."""
    return ids.astype(">u8" if wide else ">u4").tobytes()


@dataclass
class _Ends:
    """Every call's end ids, sorted: the call sharing the longest prefix with a prompt sits next to
    where the prompt would sort, so a search looks at a few neighbours, not at every call.

    Keys are cut to ``limit`` tokens, the longest prompt that will be looked up: a shared prefix
    can never be longer than the prompt, so the cut changes no answer."""

    keys: list[bytes]
    nodes: list[int]
    wide: bool

    @classmethod
    def of(cls, calls: list[Call], nodes: list[int], limit: int) -> _Ends:
        wide = any(_prompt(calls[i]).dtype.itemsize > 4 or calls[i].sampled_ids.dtype.itemsize > 4 for i in nodes)
        pairs = []
        for i in nodes:
            call = calls[i]
            head = _prompt(call)[:limit]
            tail = call.sampled_ids[: max(0, limit - head.shape[0])]
            pairs.append((_key(np.concatenate([head, tail]) if tail.shape[0] else head, wide), i))
        pairs.sort()
        return cls([k for k, _ in pairs], [i for _, i in pairs], wide)


def _best_candidate(calls: list[Call], node: int, ends: _Ends) -> tuple[int, int] | None:
    """The call the node nearly continued: among the calls that arrived before it, except those with
    an identical prompt (its own retries, explained by the discard rule), the one whose end ids
    share the longest prefix with the node's prompt (on a tie, the first found). Walking away from
    the prompt's sorted position the shared prefix only shrinks, so each direction stops at the
    first candidate that shares no more than the best found."""
    prompt = _prompt(calls[node])
    start = bisect.bisect_left(ends.keys, _key(prompt, ends.wide))
    best: tuple[int, int] | None = None
    for step in (-1, 1):
        j = start - 1 if step < 0 else start
        while 0 <= j < len(ends.nodes):
            c = ends.nodes[j]
            j += step
            candidate = calls[c]
            if c >= node or np.array_equal(_prompt(candidate), prompt):
                continue
            shared = common_prefix(candidate, prompt)
            if best is not None and shared <= best[0]:
                break
            best = (shared, c)
    return best


def near_misses(calls: list[Call], parents: list[int | None], discarded: dict[int, int]) -> dict[int, NearMiss]:
    """Near misses for every root after the first and every discarded call, keyed by that call."""
    found: dict[int, NearMiss] = {}
    roots = [i for i, p in enumerate(parents) if p is None and calls[i].prompt_ids is not None]
    explained = [r for r in roots[1:] if r not in discarded and calls[r].n_prompt]
    limit = max((calls[r].n_prompt for r in explained), default=0)
    tokened = [i for i, c in enumerate(calls) if c.prompt_ids is not None and c.n_end > 0]
    ends = _Ends.of(calls, tokened, limit) if explained else None
    for node in explained:
        assert ends is not None, "built whenever there is a root to explain"
        best = _best_candidate(calls, node, ends)
        if best is not None:
            shared, candidate = best
            kind, where, kept = classify(calls[candidate], calls[node], shared)
            found[node] = NearMiss(node, candidate, candidate, node, shared, kept, where, kind)
    for node, sibling in discarded.items():
        sibling_prompt = calls[sibling].prompt_ids
        if calls[node].prompt_ids is None or sibling_prompt is None:
            continue
        shared = common_prefix(calls[node], sibling_prompt)
        kind, where, kept = classify(calls[node], calls[sibling], shared)
        found[node] = NearMiss(node, sibling, node, sibling, shared, kept, where, kind)
    return found


def rewrite_finding(calls: list[Call], found: dict[int, NearMiss], discarded: dict[int, int]) -> Finding | None:
    """WARN ``history_rewritten``: how many calls replayed a rewritten assistant turn, and how many
    sampled tokens that left only in discarded rows (never trained as the agent's work)."""
    rewritten = [m for m in found.values() if m.kind == REWRITTEN]
    if not rewritten:
        return None
    lost = sum(calls[m.earlier].n_sampled for m in rewritten if m.earlier in discarded)
    roots = sum(1 for m in rewritten if m.node == m.later)
    return Finding(
        WARN,
        "history_rewritten",
        f"{len(rewritten)} calls replayed a rewritten assistant turn ({roots} became new roots, "
        f"{len(rewritten) - roots} made the original turn look like a discarded retry); "
        f"{lost:,} sampled tokens are left only in discarded rows",
        node_id=calls[rewritten[0].node].node_id,
    )


def near_miss_json(calls: list[Call], miss: NearMiss) -> dict:
    """The JSON form of a near miss (the other call's id, shared prefix, kind), as in ``inspect --json``."""
    return {
        "node_id": calls[miss.other].node_id,
        "common_prefix": miss.common_prefix,
        "kept": round(miss.kept, 4),
        "kind": miss.kind,
        "where": miss.where,
    }
