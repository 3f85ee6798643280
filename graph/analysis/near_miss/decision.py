"""The decision: from the evidence of one pair of calls to a kind, by a small documented table.

:func:`decide` reads a :class:`~rollout_graph.analysis.near_miss.evidence.Pair` row by row (the
rows, in order, are the table in docs/semantics.md, "Why a call broke") and returns a
:class:`Decision`: the kind, the row that named it, how strong that evidence is, how much of the
earlier conversation the later call carries, and the facts read, each in words (the evidence
``describe`` prints and the JSON contract's ``facts`` lists). The search (search.py) decides
every plausible earlier call this way and keeps the strongest; nothing else names a kind.

Strength orders the rows a pair can fall under (a candidate decided by a stronger row wins over
one decided by a weaker row; among equals, the one whose conversation the later call carries
most, then the longest shared prefix, then the latest):

    100 one request   90 spawned   80 identical   70 replayed reply (text)   65 merged reply
     60 re-tokenized (a tokenizer)   55 rejected   50 replayed reply (ids)   45 summary request
     40 read from the messages       30 the same system text, nothing else shared
     20 read from the ids alone       0 unknown

An attempt nobody continued (docs/semantics.md, "Unfinished attempts") is named only from
``ATTEMPT`` up: its messages, or a tokenizer, say why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rollout_graph.analysis.near_miss.evidence import RESUME_GAP, SHARED_SYSTEM_TOKENS, SUMMARY_WORDS, Pair
from rollout_graph.analysis.near_miss.texts import MESSAGE_COMPARED, Turn, _quote, reply_turn, turn_words, turns
from rollout_graph.core.types import (
    COMPACTION,
    NEW_CONVERSATION,
    PARALLEL_SAMPLE,
    REJECTED,
    REPLY_CARRIED,
    RESUMED,
    RETOKENIZED,
    RETRY,
    REWRITTEN,
    SIDE_CALL,
    SPAWNED,
    SUBAGENT,
    UNKNOWN,
    NearMissKind,
)

ATTEMPT = 55  # the strength from which an attempt nobody continued is named (its messages or ids show why)
HISTORY_KEPT = 0.5  # the share of an earlier conversation a later request carries to be the same conversation


@dataclass(frozen=True, slots=True)
class Decision:
    """A kind and why: the table's ``rule``, its ``strength``, the earlier messages the later call
    carries (``carried``, a tie-break between candidates), and the ``facts`` read, in words."""

    kind: NearMissKind
    rule: str
    strength: int
    facts: tuple[tuple[str, str], ...]
    carried: int = 0
    text_checked: bool = False
    evidence: str = field(init=False, default="")  # the facts in words, as one bracket of ``describe`` shows them

    def __post_init__(self) -> None:
        object.__setattr__(self, "evidence", "; ".join(words for _, words in self.facts if words))


def _own_work(p: Pair) -> tuple[bool, str]:
    """A conversation of its own (a subagent): tools offered, or a continuation of its own."""
    if p.later.has_tools:
        return True, "tools of its own"
    if p.continued:
        return True, "it continues"
    return False, "a single call without tools"


def _apart(p: Pair, rule: str, strength: int, facts: list[tuple[str, str]], carried: int = 0) -> Decision:  # noqa: D401
    """A conversation apart from the earlier one: the main conversation, a subagent or a side call."""
    if p.main:
        return Decision(
            NEW_CONVERSATION,
            rule,
            strength,
            (*facts, ("main", "the root of the conversation with the most calls")),
            carried,
        )
    own, words = _own_work(p)
    return Decision(SUBAGENT if own else SIDE_CALL, rule, strength, (*facts, ("own_work", words)), carried)


def _history_words(p: Pair) -> list[tuple[str, str]]:
    """What the later request did to the earlier conversation: kept, re-rendered, dropped, inserted."""
    h = p.history
    name = p.earlier.node_id
    before = _before(p)
    after = p.later_turns
    facts = [
        (
            "history",
            f"{h.carried} of {name}'s {h.n_before} messages carried ({len(h.kept)} unchanged, {len(h.rerendered)} re-rendered)",
        )
    ]
    if h.first == "re-rendered":
        facts.append(("first_message", "its first message re-rendered"))
    elif h.first == "changed":
        facts.append(
            (
                "first_message",
                f"its first message replaced ({turn_words([after[0]], 1)} for {turn_words([before[0]], 1)})",
            )
        )
    if h.rerendered and h.first != "re-rendered":
        facts.append(("re_rendered", "re-rendered: " + turn_words([before[i] for i, _ in h.rerendered])))
    if h.dropped:
        n = len(h.dropped)
        facts.append(("dropped", f"dropped {n} message{'s' * (n != 1)} ({turn_words([before[i] for i in h.dropped])})"))
    if h.inserted:
        n = len(h.inserted)
        facts.append(
            ("inserted", f"inserted {n} message{'s' * (n != 1)} ({turn_words([after[j] for j in h.inserted])})")
        )
    return facts


def _before(p: Pair) -> list[Turn]:
    """The earlier conversation as the history match indexes it: its request's turns, then its reply."""
    reply = reply_turn(p.earlier)
    return [*p.grams.recent(p.earlier, turns), *([reply] if reply is not None else [])]


def _gap_words(p: Pair) -> tuple[str, str] | None:
    gap = p.gap
    if gap is None:
        return None
    return (
        "gap",
        f"{gap:,.1f} s after {p.earlier.node_id} ended"
        if abs(gap) < 10
        else f"{gap:,.0f} s after {p.earlier.node_id} ended",
    )


def _tools_words(p: Pair) -> tuple[str, str] | None:
    parts = []
    if p.tools_removed:
        parts.append(
            ("all " if not p.later.tools else "")
            + f"tools removed ({', '.join(p.tools_removed[:4])}{'…' if len(p.tools_removed) > 4 else ''})"
        )
    if p.tools_added:
        parts.append(f"tools added ({', '.join(p.tools_added[:4])}{'…' if len(p.tools_added) > 4 else ''})")
    return ("tools", "; ".join(parts)) if parts else None


Facts = list[tuple[str, str]]


def decide(p: Pair) -> Decision:
    """The kind of the break between ``p.earlier`` and ``p.later``: the first row of the table whose
    evidence the pair shows (docs/semantics.md, "Why a call broke")."""
    name = p.earlier.node_id
    # 1. two choices of one request (n > 1): samples, not a break
    if p.one_request:
        words = f"another choice of {name}'s request (one record, n > 1)"
        return Decision(PARALLEL_SAMPLE, "one request", 100, (("one_request", words),))
    # 2. the earlier reply handed this call its prompt: a subagent it started
    spawned = p.spawned
    if spawned is not None:
        words = f"{name}'s reply calls {spawned!r} with this call's prompt as its arguments"
        return Decision(SUBAGENT, SPAWNED, 90, (("spawned", words),))
    # 3. the identical prompt sent again (unless the earlier call was a single call whose reply a call
    # in between already used: the same request made anew, as a summarizer's can be)
    if p.identical:
        used = p.reply_used_by
        if used is None:
            return Decision(RETRY, "identical", 80, (("identical_prompt", "the identical prompt ids"),))
    # 4. the request carries the earlier reply as text, the ids break inside it
    if p.replay is not None:
        kind, checked, words = p.replay
        return Decision(kind, "replayed reply", 70, (("reply_replayed", words),), text_checked=checked)
    # 5. the ids break inside or after the earlier sampled span (or just before it); not for an
    # identical prompt made anew (row 3): its ids never break
    if p.near_prompt_end and not p.identical:
        replayed = _replayed_by_ids(p)
        if replayed is not None:
            return replayed
    # 6. the break is inside the earlier prompt, and no messages were recorded
    if not p.has_messages:
        return _ids_only(p)
    # 7. a prompt written for another job, or the earlier history pasted into a user message
    if p.system == "other" or (p.system != "same" and p.pasted):
        return _another_job(p)
    return _same_job(p)


def _replayed_by_ids(p: Pair) -> Decision | None:
    """Row 5: a break at or after the end of the earlier prompt, read from the ids (and a tokenizer)."""
    name = p.earlier.node_id
    text = p.same_text
    if text:
        words = "the tokenizer decodes both sides to the same text"
        return Decision(RETOKENIZED, "tokenizer", 60, (("tokenizer", words),), text_checked=True)
    if p.where == "prompt":
        return None
    ids = ("ids", "the tokenizer decodes the two sides to different text" if text is False else "the token ids alone")
    fate = p.history.reply if p.has_messages else "none"
    if fate == "merged":
        words = f"{name}'s reply replayed merged with the text that went on from it"
        return Decision(REWRITTEN, "merged reply", 65, (("reply", words), ids), text_checked=text is not None)
    edited: Facts = [("reply", f"{name}'s reply replayed edited")] if fate == "re-rendered" else []
    return Decision(REWRITTEN, "replayed reply (ids)", 50, (*edited, ids), text_checked=text is not None)


def _ids_only(p: Pair) -> Decision:
    """Row 6: no messages to read: the shared ids, the main conversation, tools or a continuation."""
    if p.shared >= SHARED_SYSTEM_TOKENS:
        words = f"{p.shared:,} leading ids shared (no messages recorded to tell more)"
        return Decision(COMPACTION, "ids only", 20, (("shared_ids", words),))
    if p.main or p.later.has_tools or p.continued:
        return _apart(p, "ids only", 20, [("shared_ids", f"only {p.shared:,} ids shared, no messages recorded")])
    return Decision(UNKNOWN, "ids only", 0, (("shared_ids", f"only {p.shared:,} ids shared and no messages recorded"),))


def _another_job(p: Pair) -> Decision:
    """Row 7: a system prompt written for another job, or the earlier conversation pasted in."""
    system, pasted = p.system, p.pasted if p.system != "same" else 0
    facts: Facts = [("system", "its own system prompt" if system == "other" else f"the system prompt {system}")]
    if pasted:
        facts.append(
            ("pasted", f"{pasted} of {p.earlier.node_id}'s conversation's messages pasted into a user message")
        )
    # (a request of one message carries no conversation as messages: its history is not read)
    carried = pasted + (p.history.carried if p.later_messages > 1 else 0)
    return _apart(p, "another job", 40, facts, carried)


def _same_job(p: Pair) -> Decision:
    """Rows 8-13: the same (or a re-rendered) system prompt: the history decides."""
    name, system, h = p.earlier.node_id, p.system, p.history
    system_fact = ("system", "the same system prompt" if system == "same" else "the system prompt re-rendered")
    carried = h.carried
    same_conversation = h.first in ("same", "re-rendered") and h.carried >= HISTORY_KEPT * h.n_before
    added = [p.later_turns[j] for j in h.inserted]
    # 8. a reply merged with the text that went on from it: the earlier reply lives on in this call
    if h.reply == "merged":
        words = f"{name}'s reply replayed merged with the text that went on from it"
        return Decision(REWRITTEN, "merged reply", 65, (system_fact, ("reply", words)), carried)
    # 9. a request over the earlier conversation for a summary: its tools taken away (a single call),
    # or a summarizing instruction appended
    last_carried = max((j for _, j in (*h.kept, *h.rerendered)), default=-1)
    asked = p.summary_asked
    if (
        same_conversation
        and h.reply in ("kept", "re-rendered", "merged", "none")
        and added
        and min(h.inserted) > last_carried
        and all(t[0] == "user" for t in added)
        and (asked is not None or (p.tools_removed and not p.later.tools and not p.continued))
    ):
        facts: Facts = [system_fact]
        tools = _tools_words(p)
        if tools is not None:
            facts.append(tools)
        facts.append(("history", f"{name}'s conversation kept, then {turn_words(added, 2)} appended"))
        if asked is not None:
            facts.append(("summary_asked", f"a summary asked for ({turn_words([('user', asked, ())], 1)})"))
        else:
            facts.append(("own_work", "a single call without tools"))
        gap_words = _gap_words(p)
        if gap_words is not None:
            facts.append(gap_words)
        return Decision(SIDE_CALL, "summary request", 45, tuple(facts), carried)
    # 10. the reply left out (and never continued) and the harness's messages added: rejected, asked again
    if (
        system == "same"
        and p.same_tools
        and not p.earlier_continued
        and h.prefix
        and h.reply == "left out"
        and added
        and min(h.inserted) >= h.n_before - 1
        and all(t[0] in ("user", "tool") for t in added)
    ):
        words = f"the same history, {name}'s reply left out, then {turn_words(added, 2)} added"
        return Decision(REJECTED, "rejected", ATTEMPT, (("history", words),), carried)
    # 11. the same conversation sent again by a new invocation of the harness (a single call without
    # tools is no conversation to resume, unless its reply is carried as a reply: a harness without tools)
    alone = p.earlier_alone and not p.earlier.has_tools and h.reply not in ("kept", "re-rendered")
    signs = _new_invocation(p)
    if same_conversation and signs and not alone:
        facts = [("history", "the same conversation re-sent"), *signs]
        if h.reply in ("kept", "re-rendered"):  # it went on from the earlier call: no attempt given up on
            facts.append((REPLY_CARRIED, f"{name}'s reply carried"))
        facts += [f for f in _history_words(p) if f[0] in ("dropped", "inserted")]
        return Decision(RESUMED, "resumed", 40, tuple(facts), carried)
    # 12. the same system prompt (and tools), the history replaced or cut (by a summary another call
    # wrote: the summary call itself, or any single call without tools, is no conversation compacted)
    summary = p.summary_by if p.same_tools and p.shared > 0 else None
    # (a history cut to nothing, only a new message sent that reads as no summary, is no compaction:
    # nothing of it lives on; and a history whose every message is carried was neither replaced nor cut)
    summarised = any(SUMMARY_WORDS.search(p.later_turns[j][1][:MESSAGE_COMPARED]) for j in h.inserted)
    kept_any = h.carried > 0 or summary is not None or summarised or any(j < h.n_after - 1 for j in h.inserted)
    cut = bool(h.dropped) or summary is not None
    if p.same_tools and p.shared > 0 and summary is not p.earlier and not alone and kept_any and cut:
        words = (
            "the same system prompt and tools" if system == "same" else "the system prompt re-rendered, the same tools"
        )
        facts = [("system", words)]
        if summary is not None:
            facts.append(("summary", f"{summary.node_id}'s reply (a summary) put in the history's place"))
        if same_conversation and h.dropped:
            facts += [f for f in _history_words(p) if f[0] == "dropped"]
            facts.append(("history", "the rest of the history kept"))
        else:
            facts.append(("history", "the history replaced or cut"))
            facts += [f for f in _history_words(p) if f[0] in ("dropped", "inserted")]
        return Decision(COMPACTION, "compaction", 40, tuple(facts), carried)
    # 13. nothing of the conversation shared (or the earlier call wrote the summary this call carries)
    facts = [system_fact]
    if p.identical and p.reply_used_by is not None:
        words = (
            f"the identical prompt, but {name}'s reply was used by {p.reply_used_by.node_id} in between: a new request"
        )
        facts.append(("identical_prompt", words))
    if summary is p.earlier:
        facts.append(("summary", f"{p.earlier.node_id}'s reply (a summary) carried: a request of its own kind"))
    tools = _tools_words(p)
    if tools is not None:
        facts.append(tools)
    if not h.carried:
        facts.append(("history", "no shared history"))
    over = _conversation_over(p)
    if over is not None and not p.main and (p.later.has_tools or p.continued):
        return Decision(NEW_CONVERSATION, "apart", 30, (*facts, over), carried)
    return _apart(p, "apart", 30, facts, carried)


def _conversation_over(p: Pair) -> tuple[str, str] | None:
    """Row 13's new conversation of the same agent (not a subagent): the same system prompt, the
    earlier conversation over before the later call started (its last reply continued by nothing
    and asking for no tool: nothing waited on a subagent)."""
    if p.system != "same" or p.earlier_continued or p.history.carried:
        return None
    reply = reply_turn(p.earlier)
    gap = p.gap
    if reply is None or reply[2] or gap is None or gap < 0:
        return None
    return ("conversation_over", f"{p.earlier.node_id}'s conversation over (no tool call pending) before it began")


def _new_invocation(p: Pair) -> Facts:
    """The signs of a new invocation of the harness (row 11)."""
    h, signs = p.history, []
    if p.system == "re-rendered":
        signs.append(("system", "the system prompt re-rendered"))
    tools = _tools_words(p)
    if tools is not None:
        signs.append(tools)
    gap = p.gap
    if gap is not None and gap >= RESUME_GAP:
        signs.append(("gap", f"{gap:,.0f} s after {p.earlier.node_id} ended"))
    if h.first == "re-rendered":
        signs.append(("first_message", "its first message re-rendered"))
    before = _before(p)
    written_again = [i for i, _ in h.rerendered if 0 < i < h.n_before - 1]
    last_carried = max((j for _, j in (*h.kept, *h.rerendered)), default=-1)
    inside = [j for j in h.inserted if j < last_carried]
    if (written_again or inside) and not h.dropped and h.reply in ("kept", "re-rendered"):
        words = [f"{len(written_again)} of its messages written again"] if written_again else []
        words += [f"{len(inside)} inserted inside it"] if inside else []
        signs.append(("history_rerendered", f"the whole conversation carried, {' and '.join(words)}"))
    lost = [before[i] for i in h.dropped]
    replies_kept = all(i not in h.dropped for i, t in enumerate(before) if t[0] == "assistant")
    if lost and replies_kept and all(t[0] == "user" for t in lost):
        signs.append(("replies_kept", "every reply kept, only the harness's user messages dropped"))
    return signs


def quote(text: str) -> str:
    """A message quoted as the evidence quotes it."""
    return _quote(text)
