"""Near-miss links: why a call did not continue the call it nearly continued.

Exact prefix linking is right for training data, but harnesses rewrite history before replaying it
(a stop string cut from the model's output, a closing tag appended, reasoning dropped, tool-call JSON
re-serialised, the model's text re-tokenized differently), and then each step becomes a new root or
makes the previous step look like a discarded retry. For every root after the first and every
discarded call this finds the call it nearly continued, where the token prefix broke, and what kind
of break it was (and, when the first call is not the main conversation, what that first call is). It never changes the exact graph, its sequences or exports. This module is the one
classifier: the app's tour, its near-miss view, ``explain`` and the JSON contract all read its kinds.

Kinds, in the order they are decided (thresholds in docs/semantics.md):
- ``retry``: the two prompts are identical, or within ``NEAR_IDENTICAL`` of each other in length
  and shared prefix: the same request sampled again. A discarded call is compared with every
  sibling, and an identical-prompt sibling wins over the one that continued.
- ``retokenized``: the rest of the earlier call's end ids, from the break, decodes to exactly the
  text that follows in the later prompt, but the ids differ: the harness replayed the model's text
  byte for byte and the engine tokenized it differently. Needs a tokenizer; without one such a
  break stays ``rewritten_continuation`` and the miss records that the text was not checked.
- ``rewritten_continuation``: the break falls inside or after the earlier call's sampled span
  (the later prompt replays the earlier prompt whole, then something other than what was sampled).
- Breaks inside the earlier call's prompt, told apart by system text, tool names and history (the
  non-system messages; without messages, by the token overlap alone):
  - ``compaction``: same system text and tools, history replaced or cut (without messages: at least
    ``SHARED_SYSTEM_TOKENS`` shared tokens);
  - ``resumed``: another system text or tool set, but the same conversation: its first non-system
    message is the same and at least ``HISTORY_KEPT`` of the earlier call's history (with its reply)
    reappears (a ``--continue`` that re-renders the system prompt and drops recovery messages);
  - ``new_conversation``: the root of the rollout's main conversation (the root whose tree has the
    most calls), when another call (a title, say) arrived before it;
  - ``subagent``: another system text or tool set, and tools or a continuation of its own;
  - ``side_call``: another system text or tool set, a single call without tools (a title, a summary).
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from dataclasses import dataclass

import numpy as np

from rollout_graph.analysis.decode import Decoder, TokenizerDecoder
from rollout_graph.core.messages import content_text as _text
from rollout_graph.core.records import EMPTY_IDS, WARN, Call, Finding, NearMiss
from rollout_graph.core.types import (
    BROKEN_REPLAYS,
    COMPACTION,
    NEAR_MISS_KINDS,
    NEW_CONVERSATION,
    NEW_CONVERSATIONS,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SUBAGENT,
    NearMissKind,
)

__all__ = [
    "BROKEN_REPLAYS", "COMPACTION", "KINDS", "NEW_CONVERSATION", "NEW_CONVERSATIONS", "RESUMED", "RETOKENIZED",
    "RETRY", "REWRITTEN", "SIDE_CALL", "SUBAGENT", "NearMiss", "near_misses", "rewrite_finding",
]  # fmt: skip

KINDS = NEAR_MISS_KINDS

NEAR_IDENTICAL = 0.98
SHARED_SYSTEM_TOKENS = 32
HISTORY_KEPT = 0.5
RETOKENIZE_REACH = 8  # a break this close to the end of the earlier prompt may still be a retokenization


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


def prompt_of(call: Call) -> np.ndarray:
    """The call's prompt ids (empty when it has none)."""
    return call.prompt_ids if call.prompt_ids is not None else EMPTY_IDS


def end_ids(call: Call) -> np.ndarray:
    """The call's prompt ids followed by its sampled ids."""
    return np.concatenate([call.prompt_ids, call.sampled_ids]) if call.prompt_ids is not None else call.sampled_ids


SYSTEM_ROLES = ("system", "developer")


def system_text(call: Call) -> str | None:
    """The leading system/developer messages' text, or None when the call has no messages."""
    messages = call.request_messages
    if not messages:
        return None
    parts = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in SYSTEM_ROLES:
            break
        parts.append(_text(m.get("content")))
    return "\n".join(parts)


def tool_names(call: Call) -> frozenset[str]:
    """Names of the tools the call offered."""
    names = set()
    for tool in call.tools or ():
        if isinstance(tool, dict):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, dict) else tool.get("name")
            names.add(str(name))
    return frozenset(names)


def history(call: Call) -> list[str]:
    """The non-system messages as comparable keys (role, text, tool calls), in order."""
    out = []
    for m in call.request_messages or ():
        if not isinstance(m, dict) or m.get("role") in SYSTEM_ROLES:
            continue
        calls = m.get("tool_calls")
        extra = json.dumps(calls, sort_keys=True, default=str) if calls else ""
        out.append(f"{m.get('role')}\0{_text(m.get('content')).strip()}\0{extra}")
    return out


def _with_reply(call: Call) -> list[str]:
    reply = call.response_message
    if not isinstance(reply, dict):
        return history(call)
    return history(call) + history(Call("", "", "", 0, "", request_messages=[{"role": "assistant", **reply}]))


def _shares_history(earlier: Call, later: Call) -> bool:
    before, after = _with_reply(earlier), history(later)
    if not before or not after or before[0] != after[0]:
        return False
    remaining = Counter(after)
    found = 0
    for key in before:
        if remaining[key] > 0:
            remaining[key] -= 1
            found += 1
    return found >= HISTORY_KEPT * len(before)


def same_text(decoder: Decoder | None, earlier: Call, later: Call, at: int) -> bool | None:
    """Whether the earlier call's end ids from ``at`` decode to exactly the text the later prompt
    goes on with (None: no tokenizer to tell)."""
    if not isinstance(decoder, TokenizerDecoder):
        return None
    rest = end_ids(earlier)[at:]
    if not rest.shape[0]:
        return False
    target = decoder.text(rest)
    text = ""
    for piece in decoder.pieces(prompt_of(later)[at : at + 4 * rest.shape[0] + 8]):
        text += piece
        if len(text) >= len(target):
            break
    return bool(target) and text.startswith(target)


def classify(
    earlier: Call,
    later: Call,
    shared: int,
    decoder: Decoder | None = None,
    continued: bool = False,
    main: bool = False,
) -> tuple[NearMissKind, str, float, bool]:
    """(kind, where, kept, text_checked) for ``later``'s prompt against ``earlier``'s end ids;
    ``continued``: the later call has children of its own; ``main``: it is the root of the
    rollout's main conversation."""
    p_e, n_e, n_l = earlier.n_prompt, earlier.n_end, later.n_prompt
    where = "prompt" if shared < p_e else "sampled" if shared < n_e else "after"
    kept = min(1.0, max(0.0, (shared - p_e) / earlier.n_sampled)) if earlier.n_sampled else 0.0
    longest = max(n_l, p_e)
    if np.array_equal(_prompt(earlier), _prompt(later)) or (
        min(n_l, p_e) >= NEAR_IDENTICAL * longest and min(shared, p_e) >= NEAR_IDENTICAL * longest
    ):
        return RETRY, where, kept, False
    checked = False
    if where != "prompt" or p_e - shared <= RETOKENIZE_REACH:
        text = same_text(decoder, earlier, later, shared)
        checked = text is not None
        if text:
            return RETOKENIZED, where, kept, True
    if where != "prompt":
        return REWRITTEN, where, kept, checked
    return _context_kind(earlier, later, shared, continued, main), where, kept, checked


def _context_kind(earlier: Call, later: Call, shared: int, continued: bool, main: bool) -> NearMissKind:
    """A break inside the earlier prompt: compaction, resumed, the main conversation, a subagent or a
    side call."""
    systems = system_text(earlier), system_text(later)
    if None in systems:
        if shared >= SHARED_SYSTEM_TOKENS:
            return COMPACTION
    else:
        if systems[0] == systems[1] and tool_names(earlier) == tool_names(later) and shared > 0:
            return COMPACTION
        if _shares_history(earlier, later):
            return RESUMED
    if main:
        return NEW_CONVERSATION
    return SUBAGENT if later.has_tools or continued else SIDE_CALL


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
        """The sorted end ids of ``nodes``, cut to ``limit`` tokens."""
        wide = any(_prompt(calls[i]).dtype.itemsize > 4 or calls[i].sampled_ids.dtype.itemsize > 4 for i in nodes)
        pairs = []
        for i in nodes:
            call = calls[i]
            head = _prompt(call)[:limit]
            tail = call.sampled_ids[: max(0, limit - head.shape[0])]
            pairs.append((_key(np.concatenate([head, tail]) if tail.shape[0] else head, wide), i))
        pairs.sort()
        return cls([k for k, _ in pairs], [i for _, i in pairs], wide)


def _best_candidate(calls: list[Call], node: int, ends: _Ends, root_of: list[int]) -> tuple[int, int] | None:
    """The call the node (a root) nearly continued: among the calls that arrived before it, except
    its own descendants (a child that arrived before its parent extends it exactly) and those with
    an identical prompt (retries, matched first), the one whose end ids share the longest prefix
    with the node's prompt (on a tie, the first found). Walking away from the prompt's sorted
    position the shared prefix only shrinks, so each direction stops at the first candidate that
    shares no more than the best found."""
    prompt = _prompt(calls[node])
    start = bisect.bisect_left(ends.keys, _key(prompt, ends.wide))
    best: tuple[int, int] | None = None
    for step in (-1, 1):
        j = start - 1 if step < 0 else start
        while 0 <= j < len(ends.nodes):
            c = ends.nodes[j]
            j += step
            candidate = calls[c]
            if c >= node or root_of[c] == node or np.array_equal(_prompt(candidate), prompt):
                continue
            shared = common_prefix(candidate, prompt)
            if best is not None and shared <= best[0]:
                break
            best = (shared, c)
    return best


def _fingerprint(ids: np.ndarray) -> tuple[int, int]:
    """(length, hash of the first, middle and last 16 ids): equal prompts have equal prints."""
    n, mid = len(ids), len(ids) // 2
    sample = np.concatenate([ids[:16], ids[max(0, mid - 8) : mid + 8], ids[-16:]]).astype(np.int64, copy=False)
    return n, hash(sample.tobytes())


def _identical(calls: list[Call], node: int, others: list[int]) -> int | None:
    """The first of ``others`` whose prompt ids equal the node's."""
    prompt = prompt_of(calls[node])
    for other in others:
        candidate = calls[other].prompt_ids
        if other != node and candidate is not None and candidate.shape == prompt.shape:
            if np.array_equal(candidate, prompt):
                return other
    return None


def _siblings(topology, node: int) -> list[int]:
    parent = topology.parents[node]
    return topology.children[parent] if parent is not None else topology.roots


def near_misses(calls: list[Call], topology, decoder: Decoder | None = None) -> dict[int, NearMiss]:
    """Every root after the first and every discarded call, explained (keyed by that call).

    ``topology`` is the exact graph (graph/core/topology.py); ``decoder``, when it is a tokenizer,
    lets a break be recognised as a retokenization."""
    parents, children, discarded = topology.parents, topology.children, topology.discarded
    found: dict[int, NearMiss] = {}
    roots = [i for i, p in enumerate(parents) if p is None and calls[i].prompt_ids is not None]
    explained = [r for r in roots[1:] if r not in discarded and calls[r].n_prompt]
    # calls by prompt length and a sample of their ids: an identical prompt is looked for only
    # among these (a harness that compacts into same-sized summaries makes every root the same length)
    prints = {i: _fingerprint(c.prompt_ids) for i, c in enumerate(calls) if c.prompt_ids is not None and c.n_prompt}
    by_print: dict[tuple[int, int], list[int]] = {}
    for i, fingerprint in prints.items():
        by_print.setdefault(fingerprint, []).append(i)
    size = Counter(topology.root_of)
    main = max(topology.roots, key=lambda r: (size[r], -r)) if topology.roots else None
    pending = []
    for node in explained:
        # an identical earlier prompt that no call continued (a discarded one is explained by the
        # discard rule, from its side)
        earlier = [i for i in by_print[prints[node]] if i < node and discarded.get(i) != node]
        same = _identical(calls, node, earlier)
        if same is not None:
            kind, where, kept, _ = classify(calls[same], calls[node], calls[node].n_prompt)
            found[node] = NearMiss(node, same, same, node, calls[node].n_prompt, kept, where, kind)
        else:
            pending.append(node)
    limit = max((calls[r].n_prompt for r in pending), default=0)
    tokened = [i for i, c in enumerate(calls) if c.prompt_ids is not None and c.n_end > 0]
    ends = _Ends.of(calls, tokened, limit) if pending else None
    for node in pending:
        assert ends is not None  # built whenever something is pending
        best = _best_candidate(calls, node, ends, topology.root_of)
        if best is not None:
            shared, candidate = best
            kind, where, kept, checked = classify(
                calls[candidate], calls[node], shared, decoder, continued=bool(children[node]), main=node == main
            )
            found[node] = NearMiss(node, candidate, candidate, node, shared, kept, where, kind, checked)
    first = roots[0] if roots else None
    if first is not None and main is not None and first != main and first not in discarded and calls[main].n_prompt:
        # the first call is not the main conversation (a title call that arrived first): name it
        # against the main conversation's first call
        shared = common_prefix(calls[main], _prompt(calls[first]))
        kind, where, kept, checked = classify(calls[main], calls[first], shared, decoder, bool(children[first]))
        found[first] = NearMiss(first, main, main, first, shared, kept, where, kind, checked)
    for node, sibling in discarded.items():
        if calls[node].prompt_ids is None:
            continue
        same = _identical(calls, node, [sibling] + sorted(_siblings(topology, node)))
        if same is not None:
            sibling = same
        if calls[sibling].prompt_ids is None:
            continue
        shared = common_prefix(calls[node], calls[sibling].prompt_ids)
        kind, where, kept, checked = classify(
            calls[node], calls[sibling], shared, decoder, continued=bool(children[sibling])
        )
        found[node] = NearMiss(node, sibling, node, sibling, shared, kept, where, kind, checked)
    for group in topology.unfinished:  # re-sends nobody continued (qwen-code after a length cut)
        for node in group[1:]:
            same = _identical(calls, node, [m for m in group if m < node]) if node not in found else None
            if same is not None:
                kind, where, kept, _ = classify(calls[same], calls[node], calls[node].n_prompt)
                found[node] = NearMiss(node, same, same, node, calls[node].n_prompt, kept, where, kind)
    return found


def rewrite_finding(calls: list[Call], found: dict[int, NearMiss], discarded: dict[int, int]) -> Finding | None:
    """WARN ``history_rewritten``: how many calls replayed a rewritten (or re-tokenized) assistant
    turn, and how many sampled tokens that left only in discarded rows (never trained as the
    agent's work)."""
    rewritten = [m for m in found.values() if m.kind in BROKEN_REPLAYS]
    if not rewritten:
        return None
    lost = sum(calls[m.earlier].n_sampled for m in rewritten if m.earlier in discarded)
    roots = sum(1 for m in rewritten if m.node == m.later)
    retokenized = sum(1 for m in rewritten if m.kind == RETOKENIZED)
    how = f" ({retokenized} only re-tokenized: same text, other ids)" if retokenized else ""
    return Finding(
        WARN,
        "history_rewritten",
        f"{len(rewritten)} broken replays: calls replayed a rewritten reply of the model{how} ({roots} became new "
        f"roots, {len(rewritten) - roots} made the original call look discarded); "
        f"{lost:,} sampled tokens are left only in discarded rows",
        node_id=calls[rewritten[0].node].node_id,
    )


def near_miss_json(calls: list[Call], miss: NearMiss) -> dict:
    """The ``near_miss`` object of ``inspect --json`` (docs/cli.md)."""
    return {
        "node_id": calls[miss.other].node_id,
        "common_prefix": miss.common_prefix,
        "kept": round(miss.kept, 4),
        "kind": miss.kind,
        "where": miss.where,
        "text_checked": miss.text_checked,
    }
