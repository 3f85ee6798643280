"""Why a rollout split: for every explained break, a reason in the words users ask the question
with, what a harness author would change, and the evidence a person reads.

Built on the one near-miss classifier (graph/analysis/near_miss/); the app's tour and near-miss
view, the HTML bundle and ``explain`` all read these:

- :func:`prefix_breaks`, :func:`reason_for`, :func:`fix_for`: every root after the first, why, the fix;
- :func:`break_tokens`: both sides around the break as tokens (id and text), the first differing
  id marked; :func:`boundary_tokens`: a re-tokenized replay's two cuttings of one text;
- :func:`text_diff`: the decoded texts compared so that identical text is never marked changed
  (tests/analysis/test_break_evidence.py); :func:`visible`: whitespace shown (``↵``, ``·``, ``→``).

Everything here is data; views/builders/breaks.py and the bundle render it, escaping every trace
string through ``rollout_graph.escape``.
"""

from __future__ import annotations

import difflib
import re
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
    NEW_CONVERSATION: "a new conversation, begun after another call",
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


# -- the evidence a person reads: tokens as boxes, the text diff ---------------------------------

BREAK_BEFORE = 8  # shared tokens shown before the break
BREAK_AFTER = 24  # tokens shown from the break on
WHITESPACE: dict[str, str | int | None] = {"\n": "↵", " ": "·", "\t": "→", "\r": "␍"}


def visible(text: str) -> str:
    """The text with its whitespace made visible: ``↵`` a newline, ``·`` a space, ``→`` a tab,
    ``␍`` a carriage return, as the token views show them (plain text: escape it for HTML or Markdown)."""
    return text.translate(str.maketrans(WHITESPACE))


@dataclass(frozen=True)
class Token:
    """One token of a break view: its id, its text (decoded alone) and its position in the sequence."""

    id: int
    text: str
    position: int


@dataclass(frozen=True)
class BreakSide:
    """One side of a break: ``call`` (its node id), what the ids are (``what``), the tokens shown,
    and the index (into ``tokens``) of the first one whose id differs from the other side (None:
    none shown differs); ``more``: the sequence goes on after the tokens shown."""

    call: str
    what: str
    tokens: tuple[Token, ...]
    first_difference: int | None
    more: bool


@dataclass(frozen=True)
class BreakTokens:
    """Both sides of a break around the first differing token (``at``): the earlier call's end ids
    and the later call's prompt."""

    at: int
    earlier: BreakSide
    later: BreakSide


def _tokens(ids: np.ndarray, start: int, decoder: Decoder) -> tuple[Token, ...]:
    pieces = decoder.pieces(ids)
    return tuple(
        Token(int(t), p, start + k) for k, (t, p) in enumerate(zip(np.asarray(ids).tolist(), pieces, strict=True))
    )


def break_tokens(
    rollout: Rollout, miss: NearMiss, decoder: Decoder, before: int = BREAK_BEFORE, after: int = BREAK_AFTER
) -> BreakTokens:
    """The break as tokens: ``before`` shared tokens, then ``after`` from the first differing one,
    on each side (the earlier call's end ids: its context and output; the later call's prompt: what
    the harness sent next)."""
    earlier, later = rollout.calls[miss.earlier], rollout.calls[miss.later]
    at = miss.common_prefix
    lead = max(0, at - before)
    sides = []
    for call, ids, what in (
        (earlier, end_ids(earlier), "its context and output"),
        (later, prompt_of(later), "what the harness sent next"),
    ):
        shown = ids[lead : at + after]
        first = at - lead if at < ids.shape[0] else None
        sides.append(BreakSide(call.node_id, what, _tokens(shown, lead, decoder), first, at + after < ids.shape[0]))
    return BreakTokens(at, sides[0], sides[1])


def boundary_tokens(rollout: Rollout, miss: NearMiss, decoder: Decoder) -> tuple[tuple[Token, ...], tuple[Token, ...]]:
    """A re-tokenized replay's two cuttings of one text, as tokens with their ids: what the model
    sampled and what the replay was tokenized as, from the break to where their boundaries meet
    again (:func:`token_boundaries`)."""
    sampled, replayed = token_boundaries(rollout, miss, decoder)
    at = miss.common_prefix
    left = end_ids(rollout.calls[miss.earlier])[at : at + len(sampled)]
    right = prompt_of(rollout.calls[miss.later])[at : at + len(replayed)]
    return _tokens(left, at, decoder), _tokens(right, at, decoder)


SAME, DELETED, INSERTED, UNSEEN = "same", "del", "ins", "unseen"
_PARTS = re.compile(r"\s+|\S+")  # words with their punctuation, and the whitespace between them


def word_head(a: str, b: str) -> int:
    """The length of the longest common head of ``a`` and ``b`` that ends where a word ends (at
    whitespace, or where either text ends): a word that differs is shown whole."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    if head < len(a) and head < len(b):
        while head > 0 and not a[head - 1].isspace() and not (a[head].isspace() and b[head].isspace()):
            head -= 1
    return head


def text_diff(a: str, b: str, a_cut: bool = False, b_cut: bool = False) -> list[tuple[str, str]]:
    """``a`` against ``b`` as (``same`` | ``del`` | ``ins`` | ``unseen``, text) parts: the ``same``
    and ``del`` parts joined are ``a``, the ``same`` and ``ins`` parts ``b``. Identical text is never
    marked changed: the common head (and, for two whole texts, the common tail), to a word's edge,
    is ``same``, the middle is compared word by word (a word keeps its punctuation; difflib, no junk
    heuristic), so a word that differs is shown whole and a deletion next to an insertion never
    holds the same text.
    ``a_cut`` / ``b_cut``: that text was cut by the window shown; a trailing deletion (insertion)
    the other side may hold beyond its cut is ``unseen``, not changed."""
    head = word_head(a, b)
    tail = 0  # (a side cut by its window ends anywhere: only two whole texts share a tail)
    if not (a_cut or b_cut):
        tail = word_head(a[head:][::-1], b[head:][::-1])
    parts: list[tuple[str, str]] = []

    def add(op: str, text: str) -> None:
        if not text:
            return
        if parts and parts[-1][0] == op:
            parts[-1] = (op, parts[-1][1] + text)
        else:
            parts.append((op, text))

    add(SAME, a[:head])
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    words_a, words_b = _PARTS.findall(mid_a), _PARTS.findall(mid_b)
    matcher = difflib.SequenceMatcher(None, words_a, words_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        gone, new = "".join(words_a[i1:i2]), "".join(words_b[j1:j2])
        if op == "equal":
            add(SAME, gone)
        else:
            add(DELETED, gone)
            add(INSERTED, new)
    add(SAME, a[len(a) - tail :] if tail else "")
    if parts and not tail:
        last = parts[-1][0]
        if (last == DELETED and b_cut) or (last == INSERTED and a_cut):
            parts[-1] = (UNSEEN, parts[-1][1])
    return parts


def break_diff(
    rollout: Rollout, miss: NearMiss, decoder: Decoder, tokens: BreakTokens | None = None
) -> list[tuple[str, str]]:
    """The decoded text of both sides of a break (:func:`break_tokens`) compared with :func:`text_diff`."""
    shown = tokens or break_tokens(rollout, miss, decoder)
    left, right = shown.earlier, shown.later
    cut = min(len(left.tokens) if left.first_difference is None else left.first_difference,
              len(right.tokens) if right.first_difference is None else right.first_difference)  # fmt: skip
    shared = "".join(t.text for t in left.tokens[:cut])  # the same ids: the same text, never marked
    a = "".join(t.text for t in left.tokens[cut:])
    b = "".join(t.text for t in right.tokens[cut:])
    rest = text_diff(a, b, left.more, right.more)
    if shared and rest and rest[0][0] == SAME:
        return [(SAME, shared + rest[0][1]), *rest[1:]]
    return ([(SAME, shared)] if shared else []) + rest
