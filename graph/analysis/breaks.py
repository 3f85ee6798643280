"""Why a rollout split: for every explained break, a reason in the words users ask the question
with, what a harness author would change, and (for a re-tokenized replay) the token boundaries on
both sides.

Built on the one near-miss classifier (graph/analysis/near_miss.py); the app's tour, its near-miss
view and ``explain`` all read these."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollout_graph.analysis.decode import Decoder
from rollout_graph.analysis.near_miss import (
    BROKEN_REPLAYS,
    COMPACTION,
    NEW_CONVERSATION,
    PARALLEL_SAMPLE,
    REJECTED,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SUBAGENT,
    UNKNOWN,
    NearMiss,
    describe,
    end_ids,
    prompt_of,
    replay_alignment,
)
from rollout_graph.core.rollout import Rollout

REASONS = {
    PARALLEL_SAMPLE: "a parallel sample: another choice of the same request (n > 1), not a break",
    RETRY: "a retry: the harness re-sent an earlier call's prompt",
    RETOKENIZED: "broken replay: the model's text replayed byte for byte, but tokenized differently",
    REWRITTEN: "broken replay: the harness edited the model's output before replaying it",
    REJECTED: "rejected: the harness left the reply out and asked again (a format error, a length cut)",
    COMPACTION: "compaction: same system prompt and tools, history replaced or cut",
    RESUMED: "resumed conversation: the history re-sent by a new invocation of the harness",
    NEW_CONVERSATION: "the main conversation, begun after another call",
    SUBAGENT: "subagent: a conversation of its own (own system prompt or tools, or started by a tool call)",
    SIDE_CALL: "side call: a single call of its own (a title, a summary, ...)",
    UNKNOWN: "unknown: too little evidence to name the cause (no messages recorded)",
}
UNRELATED = "shares no token with any earlier call"
NO_TOKENIZER = "no tokenizer and no messages: whether the text was only re-tokenized was not checked (give --tokenizer)"
STOP_TAIL = 2  # a rewrite that removed at most this many final sampled tokens cut the stop string


@dataclass(frozen=True)
class Break:
    """One explained root after the first (``miss`` None when no earlier call could be compared),
    its near miss naming the earlier call it nearly continued."""

    root: int
    miss: NearMiss | None
    reason: str
    fix: str | None = None


def fix_for(rollout: Rollout, miss: NearMiss) -> str | None:
    """What the harness author would change so the replay continues the exact graph (None: nothing
    to fix, the split is real)."""
    if miss.kind == RETOKENIZED:
        return "replay token ids, not text: send the sampled ids back instead of re-encoding the assistant text"
    if miss.kind == RESUMED:
        return "resume from the recorded token ids (or re-render the system prompt and tools exactly as before)"
    if miss.kind != REWRITTEN:
        return None
    earlier = rollout.calls[miss.earlier]
    removed = earlier.n_end - miss.common_prefix
    if miss.where == "sampled" and removed <= STOP_TAIL and earlier.finish_reason == "stop":
        return "keep the stop string: replay the sampled text with its stop sequence (or replay token ids)"
    if miss.where == "sampled" and removed <= STOP_TAIL:
        return "replay the last sampled tokens as they were (no closing tag or whitespace merged into them)"
    return "replay the model's reply exactly as sampled (keep reasoning, do not re-serialise tool calls)"


def reason_for(miss: NearMiss) -> str:
    """The kind in words; a rewrite that neither a tokenizer nor the messages checked says so."""
    reason = REASONS[miss.kind]
    if miss.kind == REWRITTEN and not miss.text_checked and miss.evidence in ("", "the token ids alone"):
        reason += f" ({NO_TOKENIZER})"
    return reason


def why(rollout: Rollout, miss: NearMiss) -> str:
    """The one sentence for this break (graph/analysis/near_miss.py::describe)."""
    return describe(rollout.calls, miss)


@dataclass(frozen=True)
class ReplayDetails:
    """A re-tokenized replay in ids: the first diverging token on each side, the ids the model
    sampled and the ids the replay was tokenized as (up to where the two meet again), and how many
    of the earlier call's sampled ids change."""

    at: int  # position of the first diverging token (in both sequences)
    sampled: list[int]
    replayed: list[int]
    changed: int
    n_sampled: int


def replay_details(rollout: Rollout, miss: NearMiss) -> ReplayDetails:
    """The ids on both sides of a broken replay's first differing span (:func:`near_miss.align`)."""
    earlier, later = rollout.calls[miss.earlier], rollout.calls[miss.later]
    at = miss.common_prefix
    if miss.where != "sampled":
        ends = end_ids(earlier)
        return ReplayDetails(
            at, ends[at : at + 4].tolist(), prompt_of(later)[at : at + 4].tolist(), 0, earlier.n_sampled
        )
    found = replay_alignment(earlier, later, at)
    a, b, c, d = found.segments[0] if found.segments else (0, 0, at, at)
    sampled = earlier.sampled_ids[a:b] if b > a else earlier.sampled_ids[a : a + 1]
    replayed = prompt_of(later)[c:d] if d > c else prompt_of(later)[c : c + 1]
    return ReplayDetails(
        at, np.asarray(sampled).tolist(), np.asarray(replayed).tolist(), found.changed, earlier.n_sampled
    )


def prefix_breaks(rollout: Rollout) -> list[Break]:
    """Every root after the first, with the earlier call it nearly continued, a reason and a fix
    (the first root has nothing before it)."""
    out = []
    for root in rollout.topology.roots[1:]:
        miss = rollout.near_misses.get(root)
        if miss is None:
            out.append(Break(root, None, UNRELATED))
        else:
            out.append(Break(root, miss, reason_for(miss), fix_for(rollout, miss)))
    return out


def broken_replays(rollout: Rollout) -> list[NearMiss]:
    """Near misses where the harness replayed the model's own turn and broke the token prefix."""
    return [m for _, m in sorted(rollout.near_misses.items()) if m.kind in BROKEN_REPLAYS]


def token_boundaries(
    rollout: Rollout, miss: NearMiss, decoder: Decoder, limit: int = 16
) -> tuple[list[str], list[str]]:
    """The tokens on both sides from the break up to where their boundaries meet again: what the
    model sampled (``del|file``) and what the harness's replay was tokenized as (``d|elf|ile``)."""
    at = miss.common_prefix
    left = decoder.pieces(end_ids(rollout.calls[miss.earlier])[at : at + limit])
    right = decoder.pieces(prompt_of(rollout.calls[miss.later])[at : at + limit])
    ends_left, total = set(), 0
    for piece in left:
        total += len(piece)
        ends_left.add(total)
    total = 0
    for j, piece in enumerate(right):
        total += len(piece)
        if total and total in ends_left:
            cut = 0
            for i, p in enumerate(left):
                cut += len(p)
                if cut == total:
                    return left[: i + 1], right[: j + 1]
    return left, right
